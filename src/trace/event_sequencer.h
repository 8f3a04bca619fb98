// Restores the order of events across threads, and says what the sequence
// numbers reveal about the input: numbers that never came, and numbers that
// came twice.
//
// Each collector thread fills its own buffer, so the file holds events of
// different threads in flush order, not in the order they happened. Every
// event carries a dense per-process sequence number; the sequencer holds
// events back until all earlier ones have arrived. Definitions (stacks,
// modules, ...) pass straight through.
//
// A number that will never come is skipped, without waiting, when a
// LostRecord declared it: exactly, by its `ranges`, or (traces written
// before ranges existed) by its `events` count, which covers missing numbers
// below the LostRecord's own. Any other missing number is skipped when the
// input ends, or when `max_pending` events wait behind it; those
// are undeclared gaps (part of the file is missing, or the process was
// killed before its last flush). An event whose number was already
// delivered is a repeat (a duplicated or spliced block): it is counted and
// dropped, never delivered twice. An event whose number was given up on
// earlier arrives late: it is delivered, out of order.
//
// A compacted trace (records.h, CompactionRecord) summarizes every number
// below its `through_seq`: the sequencer moves on to that number at once, and
// the events the summary kept (numbers below it, in increasing order) pass
// straight through, neither repeats nor late.
//
// Memory: events that arrive in order are never held; held events are kept
// without their definitions' larger variant alternatives.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <queue>
#include <variant>
#include <vector>

#include "trace/records.h"
#include "trace/ring_queue.h"

namespace gpuleak::trace {

// Numbers skipped without a LostRecord declaring them.
struct SequenceGap {
  std::uint64_t first_seq = 0;
  std::uint64_t count = 0;
  bool at_end = false;               // skipped when the input ended (not by max_pending)
  std::uint64_t time_before_ns = 0;  // time of the last event delivered before the gap
  std::uint64_t latest_time_ns = 0;  // latest event time pushed when the gap was skipped
  bool operator==(const SequenceGap&) const = default;
};

// What the sequence numbers said, so far.
struct SequenceFindings {
  std::uint64_t declared_skipped = 0;  // skipped because a LostRecord listed them (ranges)
  std::uint64_t counted_skipped = 0;   // skipped against a LostRecord's count (no ranges)
  std::uint64_t undeclared_skipped = 0;
  std::vector<SequenceGap> gaps;      // the first kMaxGapsKept undeclared gaps
  std::uint64_t repeated_events = 0;  // dropped: their number was already delivered
  std::uint64_t first_repeated_seq = 0;
  std::uint64_t late_events = 0;          // delivered after their number was skipped (an
                                          // undeclared number that comes late is not missing)
  std::uint64_t lost_events_counted = 0;  // `events` of LostRecords without ranges
  static constexpr std::size_t kMaxGapsKept = 16;
};

class EventSequencer {
 public:
  explicit EventSequencer(std::size_t max_pending = 1u << 22) : max_pending_(max_pending) {}

  void push(Record record);
  // Moves the next record in order into `out`; false when none is ready.
  bool pop(Record& out);
  // The input has ended: everything held back becomes ready, in order.
  void finish() { finished_ = true; }

  const SequenceFindings& findings() const { return findings_; }
  // Numbers skipped that no LostRecord declared (gaps), for older callers.
  std::uint64_t skipped_events() const { return findings_.undeclared_skipped; }
  std::size_t pending() const { return held_.size(); }
  // Copies of the events held back, in sequence order: what a compaction
  // must write again after its summary (trace_summary.h).
  std::vector<Record> held_records() const;
  // Numbers below this were summarized by a compaction.
  std::uint64_t compacted_below() const { return compacted_below_; }
  // The next number to be delivered.
  std::uint64_t next_seq() const { return next_seq_; }

 private:
  using HeldEvent =
      std::variant<AllocRecord, FreeRecord, AllocFailedRecord, StepRecord, SampleRecord,
                   AnnotationRecord, ContextRecord, ExitRecord, LostRecord>;
  struct Slot {
    std::uint64_t seq;
    std::uint32_t index;  // into slots_
  };
  struct Later {
    bool operator()(const Slot& a, const Slot& b) const { return a.seq > b.seq; }
  };

  struct Skipped {
    std::uint64_t first, end;
    bool undeclared;
  };

  void note_lost(const LostRecord& lost);
  void deliver_seq(std::uint64_t seq, std::uint64_t time_ns);
  // Skips [next_seq_, until) and remembers it, for late events.
  void skip_to(std::uint64_t until, bool undeclared);
  // The skipped interval holding `seq`, or null: a late event, not a repeat.
  const Skipped* skipped_at(std::uint64_t seq) const;
  void deliver_late(std::uint64_t seq);
  void hold(std::uint64_t seq, HeldEvent event);
  static Record to_record(HeldEvent&& event);

  std::size_t max_pending_;
  RingQueue<Record> ready_;  // in order, to be popped (no node allocation per record)
  std::priority_queue<Slot, std::vector<Slot>, Later> held_;
  std::vector<HeldEvent> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t compacted_below_ = 0;
  bool finished_ = false;

  // Declared lost numbers: first -> end (exclusive), disjoint.
  std::map<std::uint64_t, std::uint64_t> declared_;
  // Count of lost numbers still to be found below `counted_below_`.
  std::uint64_t counted_budget_ = 0;
  std::uint64_t counted_below_ = 0;
  // Recently skipped numbers, oldest first, to tell a late event from a
  // repeat (and a gap that was only slow from one that is missing).
  std::deque<Skipped> skipped_;
  std::uint64_t last_delivered_time_ns_ = 0;
  std::uint64_t latest_time_ns_ = 0;
  SequenceFindings findings_;
};

}  // namespace gpuleak::trace
