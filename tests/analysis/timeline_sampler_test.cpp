// The report's timeline of a long run: bounded, every row where a reader
// zooms in (start, end, the moment growth was found), and no peak or dip
// lost in between.
#include "analysis/growth/timeline_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpuleak::analysis {
namespace {

TimelineRow row_for(std::uint64_t step, std::uint64_t live) {
  TimelineRow r;
  r.step = step;
  r.time_s = static_cast<double>(step) * 0.01;
  r.live_tensor_bytes = live;
  return r;
}

bool has_step(const Timeline& t, std::uint64_t step) {
  return std::find(t.step.begin(), t.step.end(), step) != t.step.end();
}

TEST(TimelineSampler, a_short_run_keeps_every_row) {
  TimelineSampler sampler;
  for (std::uint64_t s = 0; s < 2500; ++s) sampler.add(row_for(s, 1000 + s));
  Timeline t = sampler.timeline();
  ASSERT_EQ(t.step.size(), 2500u);
  EXPECT_EQ(t.boundaries, 2500u);
  for (std::uint64_t s = 0; s < 2500; ++s) {
    EXPECT_EQ(t.step[s], s);
    EXPECT_EQ(t.live_tensor_bytes[s], 1000 + s);
  }
}

TEST(TimelineSampler, a_million_rows_keep_start_end_pins_and_every_peak_in_bounded_size) {
  TimelineSampler sampler;
  constexpr std::uint64_t kRows = 1'000'000;
  for (std::uint64_t s = 0; s < kRows; ++s) {
    std::uint64_t live = 1 << 20;
    if (s == 333'333) live = 1ull << 40;  // one spike
    if (s == 777'777) live = 1;           // one dip
    sampler.add(row_for(s, live));
    if (s == 600'000) sampler.pin();  // growth found here
  }
  Timeline t = sampler.timeline();
  EXPECT_EQ(t.boundaries, kRows);
  EXPECT_LE(t.step.size(), TimelineSampler::kHeadRows + 4 * TimelineSampler::kSpans +
                               (TimelineSampler::kMaxPins + 1) * TimelineSampler::kTailRows);
  EXPECT_TRUE(std::is_sorted(t.step.begin(), t.step.end()));
  EXPECT_EQ(std::adjacent_find(t.step.begin(), t.step.end()), t.step.end()) << "no repeats";
  for (std::uint64_t s = 0; s < TimelineSampler::kHeadRows; ++s) EXPECT_TRUE(has_step(t, s)) << s;
  for (std::uint64_t s = kRows - TimelineSampler::kTailRows; s < kRows; ++s)
    EXPECT_TRUE(has_step(t, s)) << s;
  for (std::uint64_t s = 600'001 - TimelineSampler::kTailRows; s <= 600'000; ++s)
    EXPECT_TRUE(has_step(t, s)) << s;
  EXPECT_TRUE(has_step(t, 333'333)) << "the spike";
  EXPECT_TRUE(has_step(t, 777'777)) << "the dip";
  auto spike = std::find(t.step.begin(), t.step.end(), 333'333u) - t.step.begin();
  EXPECT_EQ(t.live_tensor_bytes[static_cast<std::size_t>(spike)], 1ull << 40)
      << "rows are real boundaries, not averages";
}

}  // namespace
}  // namespace gpuleak::analysis
