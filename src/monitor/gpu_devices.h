// What the driver says about each GPU at one moment (the GPU part of a raw
// sample): memory totals and the processes it lists as holding memory. Plain
// values, copied freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::monitor {

struct GpuProcessUsage {
  int pid = 0;  // as the driver reports it: may belong to another PID namespace
  // Empty when the driver cannot tell (it reports "not available").
  std::optional<std::uint64_t> memory_bytes;
};

struct GpuDevice {
  unsigned index = 0;
  std::string uuid;  // "GPU-8c3d..."; the stable name across reboots and renumbering
  std::string name;  // "NVIDIA H200"
  // The N of /dev/nvidiaN; usually the index, but not always (NVML orders by
  // PCI bus, the device files by probe order). Empty when NVML did not say.
  std::optional<unsigned> minor_number;
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_used_bytes = 0;
  // Memory the driver and firmware set aside; 0 when the driver cannot report
  // it separately (then it is counted in memory_used_bytes).
  std::uint64_t memory_reserved_bytes = 0;
  bool reserved_reported = false;
  std::vector<GpuProcessUsage> processes;
  // Set when the process list could not be read (the memory figures still hold).
  std::string process_list_error;
};

}  // namespace gpuleak::monitor
