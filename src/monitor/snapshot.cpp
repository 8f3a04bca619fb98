#include "monitor/snapshot.h"

#include <unistd.h>

#include <chrono>

#include "monitor/nvml_library.h"

namespace gpuleak::monitor {

std::map<int, std::vector<DeviceUse>> Snapshot::gpu_use_by_pid() const {
  std::map<int, std::vector<DeviceUse>> uses;
  for (const auto& device : devices) {
    for (const auto& process : device.processes) {
      uses[process.pid].push_back(DeviceUse{device.index, process.memory_bytes});
    }
  }
  return uses;
}

SnapshotSource::SnapshotSource(DeviceFilePattern pattern, bool use_nvml)
    : scanner_(std::move(pattern)) {
  std::string mountinfo;
  if (read_proc_file("/proc/self/mountinfo", mountinfo)) {
    hidden_processes_note_ = hidden_processes_note(mountinfo, geteuid() == 0);
  }
  if (!use_nvml) {
    nvml_status_.message =
        "NVML was turned off (--no-nvml). GPU memory is not shown; processes with open GPU "
        "device files still are.";
    return;
  }
  nvml_ = std::make_unique<NvmlLibrary>();
  nvml_status_.available = nvml_->available();
  nvml_status_.library_path = nvml_->library_path();
  nvml_status_.driver_version = nvml_->driver_version();
  if (!nvml_->available()) {
    nvml_status_.message = nvml_->unavailable_reason() +
                           " GPU memory is not shown; processes with open GPU device files "
                           "still are.";
  }
}

SnapshotSource::~SnapshotSource() = default;

Snapshot SnapshotSource::take(ProcScanner::HandleScope scope, const std::set<int>& requested_pids) {
  Snapshot snapshot;
  snapshot.own_pid = static_cast<int>(getpid());
  snapshot.nvml = nvml_status_;
  snapshot.device_file_glob = scanner_.pattern().glob();
  if (!hidden_processes_note_.empty()) snapshot.notes.push_back(hidden_processes_note_);
  std::set<int> watch_pids = requested_pids;
  if (nvml_ && nvml_->available()) {
    GpuReadResult read = nvml_->read_devices();
    snapshot.devices = std::move(read.devices);
    if (!read.error.empty()) snapshot.nvml.message = "NVML: " + read.error;
    // The driver's own list says who holds a context: keep their state current.
    for (const auto& device : snapshot.devices) {
      for (const auto& process : device.processes) watch_pids.insert(process.pid);
    }
  }
  snapshot.monotonic_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  snapshot.unix_time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  snapshot.table = scanner_.scan(scope, watch_pids);
  snapshot.host = read_host_memory();
  return snapshot;
}

Snapshot SnapshotSource::take_periodic(const std::set<int>& requested_pids) {
  auto scope = periodic_takes_ % kFullHandleScanEvery == 0 ? ProcScanner::HandleScope::kAll
                                                           : ProcScanner::HandleScope::kIncremental;
  ++periodic_takes_;
  return take(scope, requested_pids);
}

}  // namespace gpuleak::monitor
