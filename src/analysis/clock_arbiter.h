// Which of a program's clocks marks its iterations at a given moment.
//
// A program has several clocks that tick once per iteration of some loop:
// gpuleak.step() calls, optimizer steps, DataLoader batches, loops the
// analysis finds in the allocation stream (iteration_finder.h), and as a last
// resort time windows. They are ranked by how much they are to be trusted,
// the program's own word first:
//
//   explicit (gpuleak.step()) > optimizer-hook > dataloader >
//   python-loop > allocation-period > time-window
//
// A tick counts as a boundary of its clock's phase unless a clock ranked
// higher paces the program at that moment: it ticked since this clock's
// previous tick (so it is at least as fine: a training loop's DataLoader
// batches beside its optimizer steps), or it ticks every few of this clock's
// ticks (at most 32; the median of its recent intervals, counted in this
// clock's ticks) and its last tick is no more than twice that long ago (the
// micro-batches of gradient accumulation between two optimizer steps). So a
// validation loop run between two optimizer steps, or an evaluation after
// training, gets its own phase, while a clock that only repeats a better one
// is ignored there. A Python loop (the main script's, python_loop.py) only
// silences a clock it ticked between two ticks of: it may be an epoch loop
// around a batch loop the allocations show. A coarse explicit clock (gpuleak.step() once per epoch)
// never silences finer ones. Counting in ticks, not seconds, keeps the
// rules the same for fast and slow loops.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "trace/records.h"

namespace gpuleak::analysis {

// 0 is the most trusted.
int trust_rank(trace::StepSource source);

struct ClockKey {
  trace::StepSource source = trace::StepSource::kExplicit;
  std::uint32_t clock = 0;
  // clang-tidy's modernize-use-nullptr misreads the defaulted comparison's
  // implicit `0` (a known false positive).
  auto operator<=>(const ClockKey&) const = default;  // NOLINT(modernize-use-nullptr)
};

class ClockArbiter {
 public:
  // A clock ticked. True when the tick is a boundary of its own phase.
  bool on_tick(ClockKey key, std::uint64_t time_ns);

 private:
  // How often a more trusted clock ticks, in ticks of a less trusted one.
  struct Pace {
    std::uint64_t ticks_since = 0;      // of the less trusted clock, since the other's last tick
    std::vector<std::uint64_t> recent;  // ticks_since at the other's latest ticks (a ring)
    std::size_t next = 0;
    std::uint64_t median() const;
  };
  struct State {
    std::uint64_t ticks = 0;
    std::uint64_t last_tick_order = 0;  // global tick count at its last tick
    std::map<ClockKey, Pace> paced_by;  // more trusted clocks seen
  };
  std::map<ClockKey, State> clocks_;
  std::uint64_t tick_order_ = 0;
};

}  // namespace gpuleak::analysis
