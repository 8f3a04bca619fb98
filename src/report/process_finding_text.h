// The words for the job-level part of every report (text, HTML, JSON): a
// process's one-line summary (role, device memory and what it is made of,
// where CUDA was first used), and each process finding's summary, details
// and fix. One place, so the three reports say the same thing.
#pragma once

#include <string>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::report {

// Whether the job's processes ran on more than one host (their PIDs then
// need the host to name a process).
bool job_has_several_hosts(const analysis::JobReport& job);
// "PID 839", or "PID 839 on node-b" in a job of several hosts.
std::string process_name(const analysis::JobProcess& process, const analysis::JobReport& job);

// "peak 624 MiB as the driver counts it (CUDA context and modules 622 MiB, ...)",
// "initialized CUDA, no GPU memory", "never used CUDA".
std::string process_memory_text(const analysis::JobProcess& process);
// "dataset.py:56 `image = ...` (in GpuNormalizedImages.__getitem__)", or "".
std::string first_use_text(const analysis::CudaFirstUse& use);
// "4 DataLoader workers of PID 100 created their own CUDA context: 624 MiB each, ..."
std::string finding_summary(const analysis::ProcessFinding& finding,
                            const analysis::JobReport& job);
// Evidence lines: which PIDs, where CUDA was first used, what the memory is made of.
std::vector<std::string> finding_details(const analysis::ProcessFinding& finding,
                                         const analysis::JobReport& job);
// "DataLoader workers with their own CUDA context", for headings.
const char* finding_title(const std::string& kind);

}  // namespace gpuleak::report
