// `gpuleak doctor`: a one-shot diagnosis of who holds GPU memory and why.
//
// It looks at every process that holds GPU memory (as the driver lists it)
// or an open GPU device file, and says which of them are:
//   * orphans: re-parented after their parent died, still holding a context;
//   * zombies: exited but not reaped by their parent;
//   * DataLoader / multiprocessing workers holding their own CUDA context;
//   * processes of another PID namespace (pids the driver lists that are
//     absent here, or that name an unrelated process here);
//   * processes whose GPU memory or host RSS grows (only when the sample
//     carries trends, `doctor --watch`), with the `gpuleak attach` command;
// and which device memory no visible process accounts for. Each finding
// carries the evidence, the cause and what to do, worded for a person.
//
// Facts it relies on: a process that exits always releases its context, so
// memory stays held only while some holder is alive (or a zombie whose
// threads still run, or one not yet reaped).
//
// Pure function of its inputs; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/sample.h"
#include "monitor/sample_reader.h"

namespace gpuleak::monitor {

enum class FindingKind {
  kOrphan,
  kZombie,
  kWorkerContext,
  kOtherNamespace,
  kUnaccountedMemory,
  kGrowingMemory,
};

enum class Severity {
  kAction,   // something holds memory it should not: act on it
  kWarning,  // likely a mistake that costs memory
  kInfo,     // worth knowing, probably fine
};

struct Finding {
  FindingKind kind = FindingKind::kOrphan;
  Severity severity = Severity::kInfo;
  int pid = 0;  // 0 when the finding is about a device, not a process
  std::optional<unsigned> device_index;
  std::optional<std::uint64_t> memory_bytes;  // GPU memory involved, when known
  std::string summary;                        // one line: "PID 4711 is an orphan holding 12.0 GiB"
  std::vector<std::string> evidence;          // what was observed
  std::string cause;                          // why it happens
  std::string action;                         // what to do
  bool can_kill = false;                      // a candidate for --kill-orphans
};

struct DoctorReport {
  Sample sample;                  // the devices and processes looked at
  std::vector<Finding> findings;  // most severe first
  // One word per process in `sample.processes` (same order): "orphan",
  // "zombie", "worker", "other-namespace" or "ok".
  std::vector<std::string> verdicts;

  bool has_problems() const;  // any kAction or kWarning finding
  // Whether the driver was asked about GPU memory. Without it the findings
  // come from /proc alone: orphans and workers that hold device files, but
  // no memory amounts and no unaccounted memory, so "no findings" is not
  // "no problems".
  bool gpu_memory_examined() const { return sample.nvml.available; }
};

// Memory below this much on a device is not called unaccounted: the driver
// keeps some bookkeeping of its own. The larger of the two applies.
inline constexpr std::uint64_t kUnaccountedFloorBytes = 256ULL << 20;
inline constexpr double kUnaccountedFractionOfTotal = 0.01;

DoctorReport diagnose(const RawSample& raw, Sample sample);

const char* finding_kind_name(FindingKind kind);
const char* severity_name(Severity severity);

}  // namespace gpuleak::monitor
