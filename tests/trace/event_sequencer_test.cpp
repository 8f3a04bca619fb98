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

Record alloc(std::uint64_t seq, std::uint64_t time_ns = 0) {
  AllocRecord a;
  a.seq = seq;
  a.time_ns = time_ns;
  a.address = 0x1000 + seq;
  a.size = 64;
  return a;
}

Record lost(std::uint64_t seq, std::uint64_t events, std::vector<SeqRange> ranges) {
  return LostRecord{seq, 0, events, std::move(ranges)};
}

std::vector<std::uint64_t> seqs(std::uint64_t first, std::uint64_t end) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = first; s < end; ++s) out.push_back(s);
  return out;
}

// The collector dropped numbers 10-1009 and said so: the events after the
// gap come out as soon as the lost record arrives, without waiting for the
// end of the input, and nothing is held afterwards.
TEST(EventSequencer, numbers_a_lost_record_lists_are_skipped_without_waiting) {
  EventSequencer s;
  for (std::uint64_t q = 0; q < 10; ++q) s.push(alloc(q));
  for (std::uint64_t q = 1010; q < 5010; ++q) s.push(alloc(q));
  EXPECT_EQ(drain(s), seqs(0, 10));
  EXPECT_EQ(s.pending(), 4000u);  // behind the gap until the lost record says why
  s.push(lost(5010, 1000, {{10, 1000}}));
  std::vector<std::uint64_t> expected = seqs(1010, 5011);
  EXPECT_EQ(drain(s), expected);
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.findings().declared_skipped, 1000u);
  EXPECT_EQ(s.findings().undeclared_skipped, 0u);
  EXPECT_TRUE(s.findings().gaps.empty());
}

// Collectors before ranges gave only a count: up to that many missing
// numbers below the lost record are skipped, again without waiting.
TEST(EventSequencer, numbers_a_counting_lost_record_covers_are_skipped_without_waiting) {
  EventSequencer s;
  for (std::uint64_t q = 0; q < 5; ++q) s.push(alloc(q));
  for (std::uint64_t q = 10; q < 15; ++q) s.push(alloc(q));
  s.push(lost(15, 5, {}));
  std::vector<std::uint64_t> expected = seqs(0, 5);
  for (std::uint64_t q = 10; q < 16; ++q) expected.push_back(q);
  EXPECT_EQ(drain(s), expected);
  EXPECT_EQ(s.findings().counted_skipped, 5u);
  EXPECT_EQ(s.findings().lost_events_counted, 5u);
  EXPECT_EQ(s.findings().undeclared_skipped, 0u);
}

// A range may cover numbers whose events were written (a widened range):
// those still come out, in order.
TEST(EventSequencer, written_events_inside_a_lost_range_are_still_delivered) {
  EventSequencer s;
  s.push(alloc(0));
  s.push(alloc(3));  // written, though inside the declared range
  s.push(alloc(6));
  s.push(lost(7, 4, {{1, 5}}));  // 1-5, of which 1, 2, 4, 5 were dropped
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{0, 3, 6, 7}));
  EXPECT_EQ(s.findings().undeclared_skipped, 0u);
  EXPECT_EQ(s.findings().repeated_events, 0u);
}

// A duplicated block: its events come once, the repeats are counted.
TEST(EventSequencer, repeated_numbers_are_dropped_and_counted) {
  EventSequencer s;
  for (std::uint64_t q : {0, 1, 2, 1, 2, 3}) s.push(alloc(q));
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(s.findings().repeated_events, 2u);
  EXPECT_EQ(s.findings().first_repeated_seq, 1u);
  // Repeats that were held (both copies behind a gap) are dropped too.
  EventSequencer held;
  for (std::uint64_t q : {5, 5, 6}) held.push(alloc(q));
  held.finish();
  EXPECT_EQ(drain(held), (std::vector<std::uint64_t>{5, 6}));
  EXPECT_EQ(held.findings().repeated_events, 1u);
}

// An event whose number was given up on arrives late: it is delivered, and
// it is not a repeat.
TEST(EventSequencer, an_event_after_its_gap_was_skipped_is_late_not_a_repeat) {
  EventSequencer s(3);
  for (std::uint64_t q : {2, 3, 4, 5}) s.push(alloc(q));
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{2, 3, 4, 5}));
  s.push(alloc(1));
  EXPECT_EQ(drain(s), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(s.findings().late_events, 1u);
  EXPECT_EQ(s.findings().repeated_events, 0u);
  ASSERT_EQ(s.findings().gaps.size(), 1u);
  EXPECT_EQ(s.findings().gaps[0].first_seq, 0u);
  EXPECT_EQ(s.findings().gaps[0].count, 2u);
  EXPECT_FALSE(s.findings().gaps[0].at_end);
}

TEST(EventSequencer, events_in_order_are_never_held) {
  EventSequencer s;
  Record r;
  for (std::uint64_t q = 0; q < 100000; ++q) {
    s.push(alloc(q));
    ASSERT_EQ(s.pending(), 0u);
    ASSERT_TRUE(s.pop(r));
  }
}

TEST(EventSequencer, a_gap_left_at_the_end_records_the_times_around_it) {
  EventSequencer s;
  s.push(alloc(0, 100));
  s.push(alloc(4, 900));
  drain(s);
  s.finish();
  drain(s);
  ASSERT_EQ(s.findings().gaps.size(), 1u);
  const SequenceGap& gap = s.findings().gaps[0];
  EXPECT_EQ(gap.first_seq, 1u);
  EXPECT_EQ(gap.count, 3u);
  EXPECT_TRUE(gap.at_end);
  EXPECT_EQ(gap.time_before_ns, 100u);
  EXPECT_EQ(gap.latest_time_ns, 900u);
}

}  // namespace
}  // namespace gpuleak::trace
