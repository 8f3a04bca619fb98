// Restores the order of events across threads.
//
// Each collector thread fills its own buffer, so the file holds events of
// different threads in flush order, not in the order they happened. Every
// event carries a dense per-process sequence number; the sequencer holds
// events back until all earlier ones have arrived. Definitions (stacks,
// modules, ...) pass straight through.
//
// A gap that never fills (events lost when a process was killed mid-flush)
// is skipped when the input ends, or when more than `max_pending` events
// wait behind it.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <queue>
#include <vector>

#include "trace/records.h"

namespace gpuleak::trace {

class EventSequencer {
 public:
  explicit EventSequencer(std::size_t max_pending = 1u << 22) : max_pending_(max_pending) {}

  void push(Record record);
  // Moves the next record in order into `out`; false when none is ready.
  bool pop(Record& out);
  // The input has ended: everything held back becomes ready, in order.
  void finish() { finished_ = true; }

  std::uint64_t skipped_events() const { return skipped_events_; }
  std::size_t pending() const { return held_.size(); }

 private:
  struct Held {
    std::uint64_t seq;
    Record record;
  };
  struct Later {
    bool operator()(const Held& a, const Held& b) const { return a.seq > b.seq; }
  };

  std::size_t max_pending_;
  std::deque<Record> ready_;
  std::priority_queue<Held, std::vector<Held>, Later> held_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t skipped_events_ = 0;
  bool finished_ = false;
};

}  // namespace gpuleak::trace
