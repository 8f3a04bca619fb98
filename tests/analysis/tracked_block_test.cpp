// Reports of one gpuleak.track() block (analysis/tracked_block_window.h) on
// synthetic traces: only the block's events count, what it left allocated
// is its `leaks`, steps outside it do not judge growth, and a holder answer
// written after its end still names the holder.
#include <gtest/gtest.h>

#include <string>

#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;

std::string mark(const char* event, int block) {
  return std::string("{\"event\":\"") + event + "\",\"block\":" + std::to_string(block) + "}";
}

AnalysisOptions block_options(std::uint64_t block) {
  AnalysisOptions options;
  options.tracked_block = block;
  return options;
}

TEST(TrackedBlock, counts_only_what_the_block_left_allocated) {
  SyntheticTrace t;
  auto before = t.python_site("/work/test_model.py", 5, "setup");
  auto inside = t.python_site("/work/test_model.py", 12, "test_keeps");
  auto after = t.python_site("/work/test_model.py", 30, "teardown");
  auto freed_inside = t.alloc(before, 1000);  // allocated before, freed inside: not the block's
  t.alloc(before, 7000);                      // live all along: not the block's either
  t.annotate("tracked_block", mark("begin", 2));
  t.free(freed_inside);
  t.alloc(inside, 4096);
  t.alloc(inside, 4096);
  auto temporary = t.alloc(inside, 1 << 20);
  t.free(temporary);
  auto freed_after = t.alloc(inside, 512);
  t.annotate("tracked_block", mark("end", 2));
  t.free(freed_after);  // after the end: still counted as left at the end
  t.alloc(after, 99999);

  ProcessReport r = t.analyze(block_options(2)).build_report("x");
  ASSERT_TRUE(r.tracked_block.has_value());
  EXPECT_TRUE(r.tracked_block->found);
  EXPECT_TRUE(r.tracked_block->ended);
  EXPECT_EQ(r.leaks.bytes, 2u * 4096 + 512);
  ASSERT_EQ(r.leaks.groups.size(), 1u);
  EXPECT_EQ(r.leaks.groups[0].site.line, 12u);
  EXPECT_EQ(r.leaks.groups[0].sample_blocks.size(), 3u);
  EXPECT_EQ(r.peak_live_bytes, 2u * 4096 + (1u << 20));
  EXPECT_EQ(r.lost_events, 0u);
  EXPECT_EQ(r.unmatched_frees, 1u);  // the free of memory from before the block

  ProcessReport whole = t.analyze().build_report("x");
  EXPECT_FALSE(whole.tracked_block.has_value());
  EXPECT_TRUE(whole.leaks.groups.at(0).sample_blocks.empty())
      << "only a block's report lists blocks";
}

TEST(TrackedBlock, another_blocks_marks_and_a_missing_block_leave_it_empty) {
  SyntheticTrace t;
  auto site = t.python_site("/work/test_model.py", 12, "test_keeps");
  t.annotate("tracked_block", mark("begin", 1));
  t.alloc(site, 4096);
  t.annotate("tracked_block", mark("end", 1));
  t.annotate("tracked_block", "{not json");
  t.annotate("tracked_block", "{\"event\":\"begin\",\"block\":\"3\"}");  // a string: no mark

  ProcessReport other = t.analyze(block_options(3)).build_report("x");
  ASSERT_TRUE(other.tracked_block.has_value());
  EXPECT_FALSE(other.tracked_block->found);
  EXPECT_EQ(other.leaks.bytes, 0u);
  EXPECT_EQ(t.analyze(block_options(1)).build_report("x").leaks.bytes, 4096u);
}

TEST(TrackedBlock, a_block_cut_short_says_it_did_not_end) {
  SyntheticTrace t;
  auto site = t.python_site("/work/test_model.py", 12, "test_keeps");
  t.annotate("tracked_block", mark("begin", 1));
  t.alloc(site, 4096);
  ProcessReport r = t.analyze(block_options(1)).build_report("x");
  EXPECT_TRUE(r.tracked_block->found);
  EXPECT_FALSE(r.tracked_block->ended);
}

TEST(TrackedBlock, growth_is_judged_over_the_blocks_steps_only) {
  SyntheticTrace t;
  auto kept = t.python_site("/work/test_model.py", 20, "test_repeat");
  auto passing = t.python_site("/work/test_model.py", 21, "test_repeat");
  for (std::uint64_t s = 1; s <= 30; ++s) {  // before the block: flat
    t.free(t.alloc(passing, 2048));
    t.step(s);
  }
  t.annotate("tracked_block", mark("begin", 1));
  for (std::uint64_t s = 31; s <= 44; ++s) {  // inside: one kept tensor per step
    t.alloc(kept, 65536);
    t.free(t.alloc(passing, 2048));
    t.step(s);
  }
  t.annotate("tracked_block", mark("end", 1));
  AnalysisOptions options = block_options(1);
  options.growth.warmup_steps = 2;
  options.growth.min_steps = 8;
  ProcessReport r = t.analyze(options).build_report("x");
  EXPECT_EQ(r.growth.steps, 14u);
  EXPECT_EQ(r.growth.verdict, Verdict::kLeak);
  ASSERT_FALSE(r.growth.sites.empty());
  EXPECT_EQ(r.growth.sites[0].site.line, 20u);
}

TEST(TrackedBlock, a_holder_answer_after_the_end_names_the_left_behind_group) {
  SyntheticTrace t;
  auto site = t.python_site("/work/test_model.py", 12, "test_keeps");
  t.annotate("tracked_block", mark("begin", 1));
  t.alloc(site, 4096);
  t.annotate("tracked_block", mark("end", 1));
  t.annotate("holder",
             "{\"request_id\":\"tracked-block-1\",\"seconds\":0.1,\"sites\":[{\"site_id\":" +
                 std::to_string(site) +
                 ",\"matched_addresses\":1,\"kind\":\"tensor\",\"holder\":{\"type\":"
                 "\"list\",\"name\":\"cache\",\"owner\":\"module tests\",\"path\":"
                 "\"cache\",\"bounded\":false}}]}");
  ProcessReport r = t.analyze(block_options(1)).build_report("x");
  ASSERT_EQ(r.leaks.groups.size(), 1u);
  ASSERT_TRUE(r.leaks.groups[0].holder.has_value());
  ASSERT_TRUE(r.leaks.groups[0].holder->holder.has_value());
  EXPECT_EQ(r.leaks.groups[0].holder->holder->name, "cache");
}

}  // namespace
}  // namespace gpuleak::analysis
