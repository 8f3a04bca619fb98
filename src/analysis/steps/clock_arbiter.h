// Which of a program's clocks marks its steps at a given moment.
//
// A program has several clocks that each mark a step once per pass of some loop:
// gpuleak.step() calls, optimizer steps, DataLoader batches, loops the
// analysis finds in the allocation stream (step_finder.h), and as a last
// resort time windows. They are ranked by how much they are to be trusted,
// the program's own word first:
//
//   explicit (gpuleak.step()) > optimizer-hook > dataloader >
//   python-loop > allocation-period > time-window
//
// A clock's step is a step boundary of its clock's phase unless a clock ranked
// higher paces the program at that moment: it marked a step since this
// clock's previous one (so it is at least as fine: a training loop's
// DataLoader batches beside its optimizer steps), or it marks one every few of
// this clock's steps (at most 32; the median of its recent intervals, counted
// in this clock's steps) and its last step is no more than twice that long ago (the
// micro-batches of gradient accumulation between two optimizer steps). So a
// validation loop run between two optimizer steps, or an evaluation after
// training, gets its own phase, while a clock that only repeats a better one
// is ignored there. A Python loop (the main script's, python_loop.py) only
// silences a clock it marked a step between two steps of: it may be an epoch loop
// around a batch loop the allocations show. A coarse explicit clock (gpuleak.step() once per epoch)
// never silences finer ones. Counting in steps, not seconds, keeps the
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
  // A clock marked a step. True when it is a step boundary of its own phase.
  bool on_step_boundary(ClockKey key, std::uint64_t time_ns);

 private:
  // How often a more trusted clock marks a step, in steps of a less trusted one.
  struct Pace {
    std::uint64_t steps_since = 0;      // of the less trusted clock, since the other's last step
    std::vector<std::uint64_t> recent;  // steps_since at the other's latest steps (a ring)
    std::size_t next = 0;
    std::uint64_t median() const;
  };
  struct State {
    std::uint64_t steps = 0;
    std::uint64_t last_step_order = 0;  // global step count at its last step
    std::map<ClockKey, Pace> paced_by;  // more trusted clocks seen
  };
  std::map<ClockKey, State> clocks_;
  std::uint64_t step_order_ = 0;
};

}  // namespace gpuleak::analysis
