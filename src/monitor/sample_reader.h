// The raw sample: everything the monitor looks at, read at one moment
// (what the driver says about each GPU, the process table, host memory),
// before sample_history.h picks the processes that matter and fits trends.
// The monitor has one noun for one reading of the machine: a sample (raw
// here, shown in sample.h; `top` and the exporter count them).
//
// SampleReader owns the NVML library and the /proc scanner (with its cache)
// and is used from one thread at a time. RawSample is a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "monitor/device_files.h"
#include "monitor/gpu_devices.h"
#include "monitor/host_memory.h"
#include "monitor/proc_scanner.h"

namespace gpuleak::monitor {

class NvmlLibrary;

// How often repeated sampling reads every process's open files. A process
// that opens a GPU in its first ProcScanner::kYoungScans samples is found at
// once; an older one that opens a GPU later is found within this many samples.
inline constexpr std::size_t kFullHandleScanEvery = 30;

struct NvmlStatus {
  bool available = false;
  std::string message;  // why not, when unavailable; or a read error
  std::string library_path;
  std::string driver_version;
};

// One process's memory on one device, as the driver lists it.
struct DeviceUse {
  unsigned device_index = 0;
  std::optional<std::uint64_t> memory_bytes;
};

struct RawSample {
  double monotonic_s = 0;         // steady clock; what trends are fitted against
  std::int64_t unix_time_ms = 0;  // wall clock, for output
  NvmlStatus nvml;
  std::vector<GpuDevice> devices;
  ProcessTable table;
  HostMemory host;
  int own_pid = 0;
  std::string device_file_glob;    // what counted as a GPU device file
  std::vector<std::string> notes;  // partial problems of the reading itself

  // Every pid the driver lists, with its memory per device.
  std::map<int, std::vector<DeviceUse>> gpu_use_by_pid() const;
};

class SampleReader {
 public:
  // `use_nvml` false skips the driver entirely (the /proc side still works).
  SampleReader(DeviceFilePattern pattern, bool use_nvml);
  ~SampleReader();
  SampleReader(const SampleReader&) = delete;
  SampleReader& operator=(const SampleReader&) = delete;

  // `scope` picks how much of /proc is read (see ProcScanner); `watch_pids`
  // are kept current in incremental scans (the pids the driver lists are
  // added automatically).
  RawSample take(ProcScanner::HandleScope scope, const std::set<int>& watch_pids = {});

  // For repeated sampling: every kFullHandleScanEvery-th call (the first
  // included) reads every process's open files; the others are incremental.
  RawSample take_periodic(const std::set<int>& watch_pids = {});

  const NvmlStatus& nvml_status() const { return nvml_status_; }
  const DeviceFilePattern& pattern() const { return scanner_.pattern(); }

 private:
  std::unique_ptr<NvmlLibrary> nvml_;
  NvmlStatus nvml_status_;
  std::string hidden_processes_note_;
  ProcScanner scanner_;
  std::size_t periodic_takes_ = 0;
};

}  // namespace gpuleak::monitor
