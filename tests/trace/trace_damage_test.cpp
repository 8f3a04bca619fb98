#include "trace/trace_damage.h"

#include <gtest/gtest.h>

namespace gpuleak::trace {
namespace {

ProcessRecord process(std::uint32_t pid) {
  return ProcessRecord{pid, 1, 0, 0, "/bin/a", "a", "host", "0.1.0"};
}

Record alloc(std::uint64_t seq, std::uint64_t time_ns) {
  AllocRecord a;
  a.seq = seq;
  a.time_ns = time_ns;
  a.address = 0x1000 + seq;
  a.size = 64;
  return a;
}

// Runs `records` (in file order) through a detector and a sequencer.
std::vector<std::string> damage_of(const std::vector<Record>& records, bool stopped_early = false) {
  DamageDetector detector;
  EventSequencer sequencer;
  Record out;
  for (const Record& r : records) {
    EXPECT_TRUE(detector.observe(r));
    sequencer.push(r);
    while (sequencer.pop(out)) {
    }
  }
  sequencer.finish();
  while (sequencer.pop(out)) {
  }
  return detector.judge(sequencer.findings(), stopped_early);
}

std::vector<Record> events(std::uint64_t first, std::uint64_t end, std::uint64_t time_step_ns) {
  std::vector<Record> out;
  for (std::uint64_t s = first; s < end; ++s)
    out.push_back(alloc(s, 1'000'000'000 + s * time_step_ns));
  return out;
}

TEST(TraceDamage, an_intact_trace_has_none) {
  std::vector<Record> r = {process(7)};
  for (const Record& e : events(0, 100, 1000)) r.push_back(e);
  r.push_back(ExitRecord{100, 2'000'000'000});
  EXPECT_TRUE(damage_of(r).empty());
}

TEST(TraceDamage, a_block_missing_from_the_middle_of_an_exited_process_is_named) {
  std::vector<Record> r = {process(7)};
  for (const Record& e : events(0, 20, 1000)) r.push_back(e);
  for (const Record& e : events(40, 60, 1000)) r.push_back(e);
  r.push_back(ExitRecord{60, 2'000'000'000});
  auto damage = damage_of(r);
  ASSERT_EQ(damage.size(), 1u);
  EXPECT_EQ(damage[0],
            "20 events are missing (sequence numbers 20 to 39) and the collector did not record "
            "them as lost: part of the file is missing");
}

// Killed before its last flush: the last events of one thread never reached
// the file while another's later ones did. Not damage.
TEST(TraceDamage, the_unflushed_end_of_a_killed_process_is_not_damage) {
  std::vector<Record> r = {process(7)};
  for (const Record& e : events(0, 20, 1000)) r.push_back(e);
  for (const Record& e : events(25, 30, 1000)) r.push_back(e);
  EXPECT_TRUE(damage_of(r).empty());
}

// Without an exit record, a gap followed by far more than a flush's worth
// of time is still a missing block.
TEST(TraceDamage, a_gap_followed_by_minutes_of_events_is_damage_even_without_an_exit) {
  std::vector<Record> r = {process(7)};
  for (const Record& e : events(0, 20, 1000)) r.push_back(e);
  for (const Record& e : events(40, 60, 10'000'000'000ull)) r.push_back(e);
  ASSERT_EQ(damage_of(r).size(), 1u);
}

TEST(TraceDamage, numbers_lost_at_the_end_of_a_cut_trace_are_the_cut_not_damage) {
  std::vector<Record> r = {process(7)};
  for (const Record& e : events(0, 20, 1000)) r.push_back(e);
  for (const Record& e : events(40, 60, 1000)) r.push_back(e);
  r.push_back(ExitRecord{60, 2'000'000'000});
  EXPECT_TRUE(damage_of(r, /*stopped_early=*/true).empty());
}

TEST(TraceDamage, lost_events_the_collector_declared_are_not_damage) {
  std::vector<Record> r = {process(7)};
  for (const Record& e : events(0, 20, 1000)) r.push_back(e);
  for (const Record& e : events(40, 60, 1000)) r.push_back(e);
  r.push_back(LostRecord{60, 0, 20, {{20, 20}}});
  r.push_back(ExitRecord{61, 2'000'000'000});
  EXPECT_TRUE(damage_of(r).empty());
}

TEST(TraceDamage, repeated_numbers_are_named_once) {
  std::vector<Record> r = {process(7)};
  for (const Record& e : events(0, 20, 1000)) r.push_back(e);
  for (const Record& e : events(10, 20, 1000)) r.push_back(e);
  auto damage = damage_of(r);
  ASSERT_EQ(damage.size(), 1u);
  EXPECT_NE(damage[0].find("10 events repeat sequence numbers already read (the first 10)"),
            std::string::npos)
      << damage[0];
}

TEST(TraceDamage, a_trace_without_its_process_record_first_is_named) {
  std::vector<Record> r = events(0, 5, 1000);
  auto damage = damage_of(r);
  ASSERT_EQ(damage.size(), 1u);
  EXPECT_NE(damage[0].find("does not start with its process record"), std::string::npos);
}

TEST(TraceDamage, another_process_record_ends_this_process) {
  DamageDetector detector;
  EXPECT_TRUE(detector.observe(process(7)));
  EXPECT_TRUE(detector.observe(alloc(0, 1)));
  EXPECT_TRUE(detector.observe(process(7)));  // the same first block again: a repeat
  EXPECT_FALSE(detector.observe(process(8)));
  ASSERT_TRUE(detector.foreign_process());
  EXPECT_EQ(detector.foreign_process()->pid, 8u);
}

}  // namespace
}  // namespace gpuleak::trace
