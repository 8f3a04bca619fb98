#include "analysis/processes/process_verdict.h"

namespace gpuleak::analysis {

ProcessVerdict judge_process(const ProcessReport& r) {
  ProcessVerdict v;
  if (r.lost_events > 0) {
    v.incomplete.push_back(std::to_string(r.lost_events) +
                           (r.lost_events == 1 ? " event was" : " events were") +
                           " lost by the collector, so allocations or frees may be missing");
  }
  for (const std::string& damage : r.damage)
    v.incomplete.push_back("the trace is damaged: " + damage);
  if (!r.collector_disabled.empty()) {
    v.incomplete.push_back("the collector turned itself off (" + r.collector_disabled +
                           "), so nothing after that was recorded");
  }
  if (!r.trace_error.empty()) {
    v.incomplete.push_back("the trace stops early (" + r.trace_error + ")");
  }

  bool leaked_at_exit = exit_memory_counts_as_leak(r) && r.leaks.allocations > 0;
  if (r.growth.verdict == Verdict::kLeak) {
    v.kind = ProcessVerdictKind::kLeak;
  } else if (leaked_at_exit) {
    v.kind = ProcessVerdictKind::kLeaked;
  } else if (!v.incomplete.empty()) {
    v.kind = ProcessVerdictKind::kIncomplete;
  } else if (r.growth.verdict == Verdict::kNoLeak ||
             (exit_memory_counts_as_leak(r) && r.exited && r.growth.steps == 0)) {
    // Growth judged no leak; or no steps to judge growth by, and nothing was
    // left allocated at exit.
    v.kind = ProcessVerdictKind::kNoLeak;
  } else {
    v.kind = ProcessVerdictKind::kNotYet;
  }
  v.leak = v.kind == ProcessVerdictKind::kLeak || v.kind == ProcessVerdictKind::kLeaked;
  return v;
}

const char* process_verdict_name(ProcessVerdictKind kind) {
  switch (kind) {
    case ProcessVerdictKind::kLeak:
      return "LEAK";
    case ProcessVerdictKind::kLeaked:
      return "LEAKED";
    case ProcessVerdictKind::kNoLeak:
      return "NO LEAK";
    case ProcessVerdictKind::kNotYet:
      return "NOT YET";
    case ProcessVerdictKind::kIncomplete:
      return "INCOMPLETE";
  }
  return "NOT YET";
}

}  // namespace gpuleak::analysis
