// What the second reading for an export keeps (analysis/export_detail.h),
// the timeline's samples, and peak live memory, on synthetic traces.
#include <gtest/gtest.h>

#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;
using trace::MemoryKind;
using trace::Metric;

TEST(Timeline, a_reading_shows_only_at_the_steps_it_was_taken_before) {
  SyntheticTrace t;
  auto site = t.python_site("/work/train.py", 10, "step");
  for (std::uint64_t s = 1; s <= 10; ++s) {
    if (s == 1 || s == 6) t.sample(Metric::kHostRssBytes, 1000 * s);
    auto a = t.alloc(site, 4096);
    t.free(a);
    t.step(s);
  }
  Timeline timeline = t.analyze().build_report("x").timeline;
  ASSERT_EQ(timeline.host_rss_bytes.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) {
    if (i == 0 || i == 5) {
      EXPECT_EQ(timeline.host_rss_bytes[i], 1000u * (i + 1)) << "row " << i;
    } else {
      EXPECT_FALSE(timeline.host_rss_bytes[i].has_value())
          << "row " << i << " repeats a stale reading";
    }
  }
}

TEST(ProcessReport, peak_live_counts_tensors_inside_a_segment_once) {
  SyntheticTrace t;
  auto site = t.python_site("/work/train.py", 10, "step");
  t.alloc(site, 8u << 20, MemoryKind::kDevice);  // the cache's segment
  t.alloc(site, 4u << 20);                       // a tensor inside it
  EXPECT_EQ(t.analyze().build_report("x").peak_live_bytes, 8u << 20);
}

TEST(ExportDetail, keeps_the_followed_sites_series_the_peak_and_the_last_events) {
  SyntheticTrace t;
  auto kept = t.python_site("/work/train.py", 42, "train_step");
  auto passing = t.python_site("/work/train.py", 30, "forward");
  for (std::uint64_t s = 1; s <= 20; ++s) {
    t.alloc(kept, 1024);
    auto activation = t.alloc(passing, 1u << 20);
    t.free(activation);
    t.step(s);
  }
  ProcessReport first = t.analyze().build_report("x");
  EXPECT_FALSE(first.export_detail.has_value());
  EXPECT_EQ(first.peak_live_bytes, 19u * 1024 + 1024 + (1u << 20));

  AnalysisOptions options;
  ExportRequest request;
  request.series_site_ids = {kept};
  request.peak_bytes = first.peak_live_bytes;
  request.max_events = 5;
  request.max_live_blocks = 100;
  options.export_request = request;
  ProcessReport second = t.analyze(options).build_report("x");
  ASSERT_TRUE(second.export_detail.has_value());
  const ExportDetail& d = *second.export_detail;
  // The series: the kept site's live bytes at each step, one column.
  ASSERT_EQ(second.timeline.site_live_bytes.size(), 20u);
  for (std::size_t i = 0; i < 20; ++i) {
    ASSERT_EQ(second.timeline.site_live_bytes[i].size(), 1u);
    EXPECT_EQ(second.timeline.site_live_bytes[i][0], 1024u * (i + 1));
  }
  EXPECT_EQ(d.sites.at(kept).label(), "train.py:42");
  // The peak: the last step's activation with every kept block.
  EXPECT_EQ(d.peak_bytes, first.peak_live_bytes);
  ASSERT_EQ(d.live_at_peak.size(), 2u);
  EXPECT_EQ(d.live_at_peak[0].site.label(), "train.py:30");
  EXPECT_EQ(d.live_at_peak[1].bytes, 20u * 1024);
  // The last 5 of 60 events, oldest first; the live blocks at the end.
  EXPECT_EQ(d.events_total, 60u);
  ASSERT_EQ(d.events.size(), 5u);
  EXPECT_FALSE(d.events.back().is_alloc);
  EXPECT_EQ(d.events.back().stack_id, passing);
  EXPECT_EQ(d.live_blocks.size(), 20u);
  EXPECT_EQ(d.live_blocks_total, 20u);
  // Nothing judged twice: the verdicts are the same.
  EXPECT_EQ(second.growth.verdict, first.growth.verdict);
  EXPECT_EQ(second.growth.rate_bytes_per_step, first.growth.rate_bytes_per_step);
}

}  // namespace
}  // namespace gpuleak::analysis
