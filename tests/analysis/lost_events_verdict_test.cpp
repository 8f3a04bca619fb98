// Verdicts that stay right when the collector dropped events (a loaded
// machine): a dropped free leaves an allocation live that is not, which
// must not turn a steady loop into a leak; a real leak stays a leak; and
// when most recent steps lost events, "NO LEAK" is not said.
#include <gtest/gtest.h>

#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;

// One step of a loop that keeps its last output until the next step, with
// the output's free dropped every `drop_every`-th step (0: never).
void keep_last_output(SyntheticTrace& t, std::uint32_t site, std::uint64_t& last,
                      std::uint64_t step, std::uint64_t drop_every) {
  std::uint64_t next = t.alloc(site, 1 << 20);
  if (last) {
    if (drop_every && step % drop_every == 0) {
      t.lose_events(1);  // the free of the previous output
      t.lost_record(1);
    } else {
      t.free(last);
    }
  }
  last = next;
}

TEST(LostEventsVerdict, dropped_frees_of_a_steady_loop_are_not_a_leak) {
  SyntheticTrace t;
  auto output = t.python_site("/work/train.py", 30, "train");
  std::uint64_t last = 0;
  for (std::uint64_t step = 0; step < 400; ++step) {
    keep_last_output(t, output, last, step, 5);  // 20 % of frees lost
    t.advance_ms(10);
    t.step(step);
  }
  ProcessReport r = t.analyze().build_report("lossy");
  // A fifth of the steps lost events, under the half that caps it at NOT YET.
  EXPECT_EQ(r.growth.verdict, Verdict::kNoLeak)
      << "80 frees were lost, 80 MiB look live: " << r.growth.cause_text;
  EXPECT_GT(r.growth.lossy_steps, 0u);
  EXPECT_NE(r.growth.note.find("events were lost"), std::string::npos) << r.growth.note;
}

TEST(LostEventsVerdict, dropped_allocations_of_a_steady_loop_are_not_a_leak) {
  // Every fifth output's allocation is dropped; its free, a step later, is
  // recorded and matches nothing: that step must not look like a rise.
  SyntheticTrace t;
  auto output = t.python_site("/work/train.py", 30, "train");
  std::uint64_t last = 0;
  for (std::uint64_t step = 0; step < 400; ++step) {
    std::uint64_t next;
    if (step % 5 == 0) {
      next = t.lose_alloc(1 << 20);
      t.lost_record(1);
    } else {
      next = t.alloc(output, 1 << 20);
    }
    if (last) t.free(last);
    last = next;
    t.advance_ms(10);
    t.step(step);
  }
  ProcessReport r = t.analyze().build_report("lossy-allocations");
  EXPECT_NE(r.growth.verdict, Verdict::kLeak)
      << "80 allocations were lost, their frees matched nothing: " << r.growth.cause_text;
  EXPECT_EQ(r.unmatched_frees, 80u);
}

TEST(LostEventsVerdict, a_block_handed_out_again_after_its_free_was_dropped_is_counted_once) {
  // cudaMalloc hands the same two addresses out in turn; every fifth free
  // is dropped, and the next allocation at that address replaces the stale
  // entry. What the sites hold must follow the live set (1 MiB), not add up
  // the allocations whose frees were lost.
  SyntheticTrace t;
  auto output = t.python_site("/work/train.py", 30, "train");
  const std::uint64_t base = 0x7e0000000000ull;
  std::uint64_t last = 0;
  for (std::uint64_t step = 0; step < 400; ++step) {
    std::uint64_t next =
        t.alloc_at(output, 1 << 20, base + (step % 2) * (1 << 20), trace::MemoryKind::kDevice);
    if (last) {
      if (step % 5 == 0) {
        t.lose_events(1);
        t.lost_record(1);
      } else {
        t.free(last, trace::MemoryKind::kDevice);
      }
    }
    last = next;
    t.advance_ms(10);
    t.step(step);
  }
  ProcessReport r = t.analyze().build_report("lossy-reused");
  EXPECT_NE(r.growth.verdict, Verdict::kLeak) << r.growth.cause_text;
  std::uint64_t by_origin = 0;
  for (const OriginShare& share : r.device_memory_by_origin) by_origin += share.bytes;
  EXPECT_EQ(by_origin, 1u << 20) << "device memory by origin after 80 dropped frees";
}

TEST(LostEventsVerdict, a_real_leak_is_still_found_when_some_steps_lost_events) {
  SyntheticTrace t;
  auto output = t.python_site("/work/train.py", 30, "train");
  auto leak = t.python_site("/work/train.py", 42, "train");
  std::uint64_t last = 0;
  for (std::uint64_t step = 0; step < 300; ++step) {
    keep_last_output(t, output, last, step, 5);
    t.alloc(leak, 64 << 10);
    t.advance_ms(10);
    t.step(step);
  }
  ProcessReport r = t.analyze().build_report("lossy-leak");
  ASSERT_EQ(r.growth.verdict, Verdict::kLeak);
  ASSERT_FALSE(r.growth.sites.empty());
  EXPECT_EQ(r.growth.sites.front().site.label(), "train.py:42");
  EXPECT_NEAR(r.growth.rate_bytes_per_step, 64 << 10, 1);
}

TEST(LostEventsVerdict, no_leak_is_not_said_when_most_recent_steps_lost_events) {
  SyntheticTrace t;
  auto output = t.python_site("/work/train.py", 30, "train");
  std::uint64_t last = 0;
  for (std::uint64_t step = 0; step < 400; ++step) {
    std::uint64_t next = t.alloc(output, 1 << 20);
    if (last) t.free(last);
    last = next;
    if (step >= 150 && step % 4 != 0) t.lose_events(3);  // other events of the step
    t.advance_ms(10);
    t.step(step);
  }
  ProcessReport r = t.analyze().build_report("mostly-lost");
  EXPECT_EQ(r.growth.verdict, Verdict::kNotYet) << r.growth.note;
  EXPECT_NE(r.growth.note.find("too few complete steps"), std::string::npos) << r.growth.note;
}

}  // namespace
}  // namespace gpuleak::analysis
