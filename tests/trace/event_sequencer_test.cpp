#include "trace/event_sequencer.h"

#include <gtest/gtest.h>

namespace gpuleak::trace {
namespace {

std::vector<std::uint64_t> drain(EventSequencer& s) {
  std::vector<std::uint64_t> out;
  Record r;
  while (s.pop(r)) {
    std::uint64_t seq = 0;
    if (record_seq(r, &seq))
      out.push_back(seq);
    else
      out.push_back(~0ull);  // a definition
  }
  return out;
}

Record step(std::uint64_t seq) { return StepRecord{seq, 0, seq, StepSource::kExplicit}; }

TEST(EventSequencer, events_from_two_threads_come_out_in_seq_order) {
  EventSequencer s;
  for (std::uint64_t seq : {1, 3, 5}) s.push(step(seq));  // thread B's buffer flushed first
  EXPECT_TRUE(drain(s).empty());                          // 0 has not arrived
  for (std::uint64_t seq : {0, 2, 4}) s.push(step(seq));
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(EventSequencer, definitions_pass_straight_through) {
  EventSequencer s;
  s.push(step(1));
  s.push(StackRecord{1, {0x10}, {}});
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{~0ull}));
}

TEST(EventSequencer, gap_is_skipped_at_end_of_input) {
  EventSequencer s;
  s.push(step(0));
  s.push(step(5));
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{0}));
  s.finish();
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{5}));
  EXPECT_EQ(s.skipped_events(), 4u);
}

TEST(EventSequencer, gap_is_skipped_when_too_much_waits_behind_it) {
  EventSequencer s(3);
  for (std::uint64_t seq : {2, 3, 4, 5}) s.push(step(seq));
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(s.skipped_events(), 2u);
}

}  // namespace
}  // namespace gpuleak::trace
