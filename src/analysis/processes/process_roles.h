// What a process is to its job, judged from what is known about it:
//   * the Python package's `process_role` annotation (a DataLoader worker's
//     id, multiprocessing's name for the process and its parent),
//   * the Python frames of its first CUDA use (torch's worker loop,
//     multiprocessing's pool worker, torch.multiprocessing.spawn's wrapper),
//   * the kernel's name of its main thread (PyTorch names DataLoader workers
//     "pt_data_worker"), its command line (multiprocessing's spawn and
//     forkserver entry points, its helpers), its parent's command line (a
//     fork that did not exec carries the same one), and
//   * the `distributed` annotation (RANK and WORLD_SIZE).
// The first rule that applies decides; docs/processes.md lists them.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

struct RoleEvidence {
  int pid = 0;
  int parent_pid = 0;  // when first known
  std::string comm;    // the main thread's name
  std::vector<std::string> argv;
  std::optional<ProcessRoleAnnotation> role;   // the `process_role` annotation
  std::optional<DistributedRank> distributed;  // the `distributed` annotation
  std::vector<Frame> frames;                   // of the first CUDA use
};

// `parent`: the evidence of its parent, when it is known (or null).
ProcessRole classify_role(const RoleEvidence& process, const RoleEvidence* parent, int main_pid);

// Splits a command line the way ProcessRecord joined argv (on spaces).
std::vector<std::string> split_command_line(const std::string& command_line);

}  // namespace gpuleak::analysis
