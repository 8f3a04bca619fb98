#include "analysis/steps/clock_arbiter.h"

#include <algorithm>

namespace gpuleak::analysis {

namespace {

constexpr std::size_t kIntervalsKept = 15;
constexpr double kRecentIntervals = 2.0;   // "stepped recently": within twice its interval
constexpr double kMaxCoarserRatio = 32.0;  // ... and no more than this much coarser

}  // namespace

int trust_rank(trace::StepSource source) {
  switch (source) {
    case trace::StepSource::kExplicit:
      return 0;
    case trace::StepSource::kOptimizerHook:
      return 1;
    case trace::StepSource::kDataLoader:
      return 2;
    case trace::StepSource::kPythonLoop:
      return 3;
    case trace::StepSource::kAllocationPeriod:
      return 4;
    case trace::StepSource::kTimeWindow:
      return 5;
  }
  return 5;  // a source this gpuleak does not know: least trusted
}

std::uint64_t ClockArbiter::Pace::median() const {
  if (recent.empty()) return 0;
  std::vector<std::uint64_t> sorted = recent;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  return sorted[sorted.size() / 2];
}

bool ClockArbiter::on_step_boundary(ClockKey key, std::uint64_t /*time_ns*/) {
  ++step_order_;
  // The stepping clock is a more trusted one for every less trusted clock:
  // each of those learns how many of its own steps this one's take.
  for (auto& [other_key, other] : clocks_) {
    if (trust_rank(other_key.source) <= trust_rank(key.source)) continue;
    auto found = other.paced_by.find(key);
    if (found == other.paced_by.end()) continue;
    Pace& pace = found->second;
    if (pace.recent.size() < kIntervalsKept) {
      pace.recent.push_back(pace.steps_since);
    } else {
      pace.recent[pace.next] = pace.steps_since;
      pace.next = (pace.next + 1) % kIntervalsKept;
    }
    pace.steps_since = 0;
  }
  State& self = clocks_[key];
  bool paced_by_better = false;
  for (const auto& [other_key, other] : clocks_) {
    if (trust_rank(other_key.source) >= trust_rank(key.source) || other.steps == 0) continue;
    Pace& pace = self.paced_by[other_key];
    ++pace.steps_since;
    if (self.steps > 0 && other.last_step_order > self.last_step_order) {
      paced_by_better = true;  // it marked a step since this clock's last one
      continue;
    }
    // The main script's loop may be an epoch loop around batches that only
    // the allocations show (the batch loop in another module): a coarser
    // Python loop never silences a finer clock, it only wins where it is at
    // least as fine.
    if (other_key.source == trace::StepSource::kPythonLoop) continue;
    std::uint64_t every = pace.median();
    if (every > 0 && static_cast<double>(every) <= kMaxCoarserRatio &&
        static_cast<double>(pace.steps_since) <= kRecentIntervals * static_cast<double>(every)) {
      paced_by_better = true;
    }
  }
  ++self.steps;
  self.last_step_order = step_order_;
  return !paced_by_better;
}

}  // namespace gpuleak::analysis
