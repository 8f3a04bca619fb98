// The one verdict about a traced process that every output shows: the text
// report, the JSON report, the HTML banner, `--fail-on-leak`, `run`'s exit
// status. Built from the ProcessReport alone, so no two outputs can disagree.
//
//   LEAK        memory grows step after step (the growth verdict)
//   LEAKED      memory is still allocated at exit, in a process where that is
//               a leak by itself (not PyTorch: see exit_memory_counts_as_leak)
//   NO LEAK     enough steps and nothing grows, or (no steps) everything was
//               freed before a normal exit
//   NOT YET     too little to judge: too few steps, or a process that ended
//               without exiting and left nothing live
//   INCOMPLETE  no leak was seen, but data is missing (events the collector
//               lost, a damaged or cut trace): never a clean bill
//
// `incomplete` lists why data is missing, one sentence each, also for LEAK
// and LEAKED (a lost free can look like a leak).
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

enum class ProcessVerdictKind { kLeak, kLeaked, kNoLeak, kNotYet, kIncomplete };

struct ProcessVerdict {
  ProcessVerdictKind kind = ProcessVerdictKind::kNotYet;
  bool leak = false;  // what --fail-on-leak fails on
  std::vector<std::string> incomplete;
  bool complete() const { return incomplete.empty(); }
};

ProcessVerdict judge_process(const ProcessReport& report);
// "LEAK", "LEAKED", "NO LEAK", "NOT YET", "INCOMPLETE".
const char* process_verdict_name(ProcessVerdictKind kind);

}  // namespace gpuleak::analysis
