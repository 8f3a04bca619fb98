// The report for people: what leaked, where, how fast, why, and what to do.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::report {

struct TextOptions {
  bool all_frames = false;  // also show frames inside CUDA, PyTorch, Python
  std::size_t max_groups = 20;
  std::size_t max_frames = 8;  // per stack, not counting hidden ones
  // Processes that did no GPU work get no section (the job's process list
  // gives them one line).
  bool sections_only_for_gpu_work = false;
};

void write_text_report(std::ostream& out, const std::vector<analysis::ProcessReport>& reports,
                       const TextOptions& options = {});

// The job first (every process with its role, device memory and first CUDA
// use; the process findings), then a section for each process that did GPU
// work (job_text_report.cpp).
void write_job_text_report(std::ostream& out, const analysis::JobReport& job,
                           const std::vector<analysis::ProcessReport>& reports,
                           const TextOptions& options = {});

// The one-line live message `gpuleak run` prints on stderr when a leak is
// found while the job runs, e.g.
// "LEAK +38.0 MiB/step since step 12 from train.py:42 `out = model(x)`; held by ...".
std::string live_leak_message(const analysis::GrowthReport& growth);

// What one step is called in reports, by its step source: "step"
// (optimizer, gpuleak.step()), "batch" (DataLoader), "iteration" (a loop
// found in the allocations), "window" (time windows).
std::string step_noun(const std::string& step_source);

}  // namespace gpuleak::report
