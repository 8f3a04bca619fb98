// Verdicts on compacted traces (trace/trace_summary.h): the report of a
// trace whose first part is a summary gives the verdict and sites of the
// whole trace, counts the summarized allocations, says it was compacted,
// and is never clean when events were lost before the compaction.
#include <gtest/gtest.h>

#include "analysis/processes/process_verdict.h"
#include "analysis/synthetic_trace.h"
#include "trace/codec.h"
#include "trace/event_sequencer.h"
#include "trace/trace_summary.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;

// The records as the bounded writer leaves them after compacting at record
// `at`: the summary of those before, then the rest raw.
std::vector<trace::Record> compacted(const std::vector<trace::Record>& records, std::size_t at) {
  trace::TraceSummary summary;
  for (std::size_t i = 0; i < at; ++i) summary.observe(records[i]);
  std::vector<trace::Record> out;
  summary.encode(
      [&](std::string_view block, std::uint32_t) {
        const auto* cursor = reinterpret_cast<const std::uint8_t*>(block.data());
        const auto* end = cursor + block.size();
        trace::Record r;
        while (cursor < end &&
               trace::decode_record(&cursor, end, r) == trace::DecodeStatus::kRecord)
          out.push_back(r);
        return true;
      },
      64u << 20);
  out.insert(out.end(), records.begin() + static_cast<std::ptrdiff_t>(at), records.end());
  return out;
}

ProcessReport report_of(const std::vector<trace::Record>& records) {
  ProcessAnalysis analysis;
  trace::EventSequencer sequencer;
  trace::Record r;
  for (const auto& record : records) {
    sequencer.push(record);
    while (sequencer.pop(r)) analysis.consume(r);
  }
  sequencer.finish();
  while (sequencer.pop(r)) analysis.consume(r);
  analysis.finish();
  return analysis.build_report("t");
}

// A training loop: a working set, churn, and (leak) one 4 KiB block kept a step.
SyntheticTrace training(bool leak, std::uint64_t steps, std::uint64_t lose_at_step = 0,
                        std::uint64_t leak_from_step = 1) {
  SyntheticTrace t;
  t.annotate("torch_tracking", R"({"mode": "allocator-hook"})");
  auto weights = t.python_site("/work/train.py", 10, "build");
  auto activation = t.python_site("/work/train.py", 20, "forward");
  auto kept = t.python_site("/work/train.py", 30, "accumulate");
  for (int i = 0; i < 20; ++i) t.alloc(weights, 1 << 20);
  for (std::uint64_t step = 1; step <= steps; ++step) {
    std::vector<std::uint64_t> churn;
    for (int i = 0; i < 10; ++i) churn.push_back(t.alloc(activation, 256 << 10));
    for (auto address : churn) t.free(address);
    if (leak && step >= leak_from_step) t.alloc(kept, 4096);
    if (step == lose_at_step) {
      t.lose_events(3);
      t.lost_record(3);
    }
    t.advance_ms(20);
    t.step(step);
  }
  return t;
}

TEST(CompactedTrace, a_leak_keeps_its_verdict_site_and_whole_live_count) {
  SyntheticTrace t = training(true, 800);
  ProcessReport whole = report_of(t.records());
  ProcessReport part = report_of(compacted(t.records(), t.records().size() / 2));
  ASSERT_EQ(whole.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(part.growth.verdict, Verdict::kLeak);
  ASSERT_FALSE(part.growth.sites.empty());
  EXPECT_EQ(part.growth.sites[0].site.line, 30u);
  // The site's count as of its last judgement: the whole run's, not the
  // raw tail's 400 steps (judgements come every window/4 steps, so the
  // two may be a step apart).
  EXPECT_GE(part.growth.sites[0].live_allocations, 790u);
  // What is live at the end is the same, block for block.
  EXPECT_EQ(part.leaks.allocations, whole.leaks.allocations);
  EXPECT_EQ(part.leaks.bytes, whole.leaks.bytes);
  EXPECT_EQ(part.allocations, whole.allocations);
  EXPECT_EQ(part.frees, whole.frees);
  EXPECT_EQ(part.lost_events, 0u);
  ASSERT_TRUE(part.compaction);
  EXPECT_EQ(part.compaction->compactions, 1u);
  EXPECT_GT(part.compaction->summarized_steps, 300u);
  EXPECT_FALSE(part.compaction->steps.empty());
  EXPECT_TRUE(judge_process(part).incomplete.empty());
}

// A leak under way before the compaction is dated from the summary's steps
// (what was live at each), not from the first raw step.
TEST(CompactedTrace, a_leak_that_began_in_the_summarized_part_is_dated_there) {
  SyntheticTrace t = training(true, 800, 0, /*leak_from_step=*/100);
  ProcessReport whole = report_of(t.records());
  ProcessReport part = report_of(compacted(t.records(), t.records().size() / 2));
  ASSERT_EQ(whole.growth.verdict, Verdict::kLeak);
  ASSERT_EQ(part.growth.verdict, Verdict::kLeak);
  ASSERT_TRUE(whole.growth.first_growing_step);
  EXPECT_NEAR(static_cast<double>(*whole.growth.first_growing_step), 100, 2);
  ASSERT_TRUE(part.growth.first_growing_step);
  EXPECT_NEAR(static_cast<double>(*part.growth.first_growing_step), 100, 2);
  ASSERT_FALSE(part.growth.sites.empty());
  EXPECT_NEAR(static_cast<double>(part.growth.sites[0].first_growing_step), 100, 2);
}

TEST(CompactedTrace, a_leak_that_began_in_the_raw_part_keeps_its_raw_date) {
  SyntheticTrace t = training(true, 800, 0, /*leak_from_step=*/600);
  ProcessReport whole = report_of(t.records());
  ProcessReport part = report_of(compacted(t.records(), t.records().size() / 2));
  ASSERT_EQ(part.growth.verdict, Verdict::kLeak);
  ASSERT_TRUE(part.growth.first_growing_step);
  EXPECT_NEAR(static_cast<double>(*part.growth.first_growing_step), 600, 2);
  ASSERT_TRUE(whole.growth.first_growing_step);
  EXPECT_EQ(*part.growth.first_growing_step, *whole.growth.first_growing_step);
}

TEST(CompactedTrace, a_clean_run_stays_clean) {
  SyntheticTrace t = training(false, 800);
  ProcessReport part = report_of(compacted(t.records(), t.records().size() / 2));
  EXPECT_EQ(part.growth.verdict, Verdict::kNoLeak);
  EXPECT_EQ(judge_process(part).kind, ProcessVerdictKind::kNoLeak);
}

TEST(CompactedTrace, events_lost_before_the_compaction_keep_the_run_from_being_called_clean) {
  SyntheticTrace t = training(false, 800, /*lose_at_step=*/100);
  ProcessReport part = report_of(compacted(t.records(), t.records().size() / 2));
  EXPECT_GT(part.lost_events, 0u);
  ProcessVerdict verdict = judge_process(part);
  EXPECT_NE(verdict.kind, ProcessVerdictKind::kNoLeak);
  EXPECT_FALSE(verdict.incomplete.empty());
}

// The writer compacts when the file passes half its bound, which may be just
// before the program ends (a backlog written at exit): the raw part then
// holds a few steps, too few to judge, and the summary's step totals (one
// every step_resolution steps) are what shows how memory went.
TEST(CompactedTrace, a_clean_run_compacted_just_before_its_end_is_judged_from_the_summary) {
  SyntheticTrace t = training(false, 800);
  const auto& records = t.records();
  ProcessReport part = report_of(compacted(records, records.size() - 5 * 22));
  ASSERT_TRUE(part.compaction);
  EXPECT_EQ(part.growth.verdict, Verdict::kNoLeak) << part.growth.undecided_reason;
  EXPECT_NE(part.growth.note.find("summary"), std::string::npos) << part.growth.note;
  EXPECT_EQ(judge_process(part).kind, ProcessVerdictKind::kNoLeak);
}

TEST(CompactedTrace, a_leak_compacted_just_before_its_end_is_never_called_clean) {
  SyntheticTrace t = training(true, 800);
  const auto& records = t.records();
  ProcessReport part = report_of(compacted(records, records.size() - 5 * 23));
  ASSERT_TRUE(part.compaction);
  EXPECT_NE(part.growth.verdict, Verdict::kNoLeak);
  EXPECT_NE(judge_process(part).kind, ProcessVerdictKind::kNoLeak);
}

}  // namespace
}  // namespace gpuleak::analysis
