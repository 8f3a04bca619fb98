#include "monitor/sample_reader.h"

#include <unistd.h>

#include <chrono>

#include "monitor/nvml_library.h"

namespace gpuleak::monitor {

std::map<int, std::vector<DeviceUse>> RawSample::gpu_use_by_pid() const {
  std::map<int, std::vector<DeviceUse>> uses;
  for (const auto& device : devices) {
    for (const auto& process : device.processes) {
      uses[process.pid].push_back(DeviceUse{device.index, process.memory_bytes});
    }
  }
  return uses;
}

SampleReader::SampleReader(DeviceFilePattern pattern, bool use_nvml)
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

SampleReader::~SampleReader() = default;

RawSample SampleReader::take(ProcScanner::HandleScope scope, const std::set<int>& requested_pids) {
  RawSample raw;
  raw.own_pid = static_cast<int>(getpid());
  raw.nvml = nvml_status_;
  raw.device_file_glob = scanner_.pattern().glob();
  if (!hidden_processes_note_.empty()) raw.notes.push_back(hidden_processes_note_);
  std::set<int> watch_pids = requested_pids;
  if (nvml_ && nvml_->available()) {
    GpuReadResult read = nvml_->read_devices();
    raw.devices = std::move(read.devices);
    if (!read.error.empty()) raw.nvml.message = "NVML: " + read.error;
    // The driver's own list says who holds a context: keep their state current.
    for (const auto& device : raw.devices) {
      for (const auto& process : device.processes) watch_pids.insert(process.pid);
    }
  }
  raw.monotonic_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  raw.unix_time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  raw.table = scanner_.scan(scope, watch_pids);
  raw.host = read_host_memory();
  return raw;
}

RawSample SampleReader::take_periodic(const std::set<int>& requested_pids) {
  auto scope = periodic_takes_ % kFullHandleScanEvery == 0 ? ProcScanner::HandleScope::kAll
                                                           : ProcScanner::HandleScope::kIncremental;
  ++periodic_takes_;
  return take(scope, requested_pids);
}

}  // namespace gpuleak::monitor
