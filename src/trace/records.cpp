#include "trace/records.h"

namespace gpuleak::trace {

bool record_seq(const Record& record, std::uint64_t* seq) {
  return std::visit(
      [seq](const auto& r) {
        if constexpr (requires { r.seq; }) {
          *seq = r.seq;
          return true;
        } else {
          return false;
        }
      },
      record);
}

bool record_time(const Record& record, std::uint64_t* time_ns) {
  return std::visit(
      [time_ns](const auto& r) {
        if constexpr (requires { r.time_ns; }) {
          *time_ns = r.time_ns;
          return true;
        } else {
          return false;
        }
      },
      record);
}

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
      return "device";
    case MemoryKind::kDeviceAsync:
      return "device-async";
    case MemoryKind::kManaged:
      return "managed";
    case MemoryKind::kHostPinned:
      return "host-pinned";
    case MemoryKind::kVmmPhysical:
      return "vmm-physical";
    case MemoryKind::kVmmMapping:
      return "vmm-mapping";
    case MemoryKind::kAddressRange:
      return "address-range";
    case MemoryKind::kArray:
      return "array";
    case MemoryKind::kTorchBlock:
      return "torch-block";
  }
  return "unknown";
}

const char* metric_name(Metric metric) {
  switch (metric) {
    case Metric::kHostRssBytes:
      return "host_rss_bytes";
    case Metric::kDeviceUsedBytes:
      return "device_used_bytes";
    case Metric::kDeviceTotalBytes:
      return "device_total_bytes";
    case Metric::kPoolReservedBytes:
      return "pool_reserved_bytes";
    case Metric::kPoolUsedBytes:
      return "pool_used_bytes";
    case Metric::kTorchAllocatedBytes:
      return "torch_allocated_bytes";
    case Metric::kTorchReservedBytes:
      return "torch_reserved_bytes";
  }
  return "unknown";
}

const char* step_source_name(StepSource source) {
  switch (source) {
    case StepSource::kOptimizerHook:
      return "optimizer-hook";
    case StepSource::kExplicit:
      return "explicit";
    case StepSource::kTimeWindow:
      return "time-window";
    case StepSource::kDataLoader:
      return "dataloader";
    case StepSource::kAllocationPeriod:
      return "allocation-period";
  }
  return "unknown";
}

}  // namespace gpuleak::trace
