// The job-level analysis: every process of one run, from its trace (how it
// used CUDA) and from what `gpuleak run` saw of it from outside
// (processes.jsonl: its life, its state, its device memory as the driver
// counts it). It names each process's role, splits its device memory into
// the CUDA context and what was allocated, says where CUDA was first used,
// and judges the causes that are about processes:
//   worker_context       DataLoader workers that created their own CUDA context
//   idle_worker_context  pool workers holding a context while idle
//   left_running         a child still running (holding GPU memory) after the
//                        main program's code returned
//   orphan               a process of the job still alive, holding GPU memory,
//                        after the main program exited and the grace period
//   zombie               a process that exited and stayed unreaped
// Facts it relies on: a CUDA context lives exactly as long as its process;
// a zombie holds no device memory once the driver has seen it exit.
//
// Pure function of its inputs; thread-safe.
#pragma once

#include <optional>
#include <vector>

#include "analysis/model/report_model.h"
#include "analysis/processes/process_samples.h"

namespace gpuleak::analysis {

struct JobAnalysisOptions {
  // A pool worker whose last GPU work was at least this long before it ended
  // (or the job did) held its context idle.
  double idle_worker_seconds = 3.0;
  // A child still running this long after the main program returned.
  double left_running_seconds = 2.0;
  // A process seen as a zombie for at least this long.
  double zombie_seconds = 2.0;
};

// `observed` is what `gpuleak run` saw (absent for traces of other runs or
// of older versions: then roles come from the traces alone and the findings
// that need observation are not made).
JobReport analyze_job(const std::vector<ProcessReport>& reports,
                      const std::optional<JobObservations>& observed,
                      const JobAnalysisOptions& options = {});

// Whether the job has a finding `--fail-on-leak` fails on.
bool has_process_findings(const JobReport& job);

}  // namespace gpuleak::analysis
