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
    case MemoryKind::kGraphExec:
      return "graph-exec";
  }
  return "unknown";
}

// The names are the vocabulary's (include/gpuleak/vocabulary.h).
const char* metric_name(Metric metric) {
  switch (static_cast<int>(metric)) {
#define GPULEAK_METRIC_NAME_(NAME, ID, TEXT) \
  case ID:                                   \
    return TEXT;
    GPULEAK_METRICS(GPULEAK_METRIC_NAME_)
#undef GPULEAK_METRIC_NAME_
  }
  return "unknown";
}

const char* step_source_name(StepSource source) {
  switch (static_cast<int>(source)) {
#define GPULEAK_STEP_SOURCE_NAME_(NAME, ID, TEXT) \
  case ID:                                        \
    return TEXT;
    GPULEAK_STEP_SOURCES(GPULEAK_STEP_SOURCE_NAME_)
#undef GPULEAK_STEP_SOURCE_NAME_
  }
  return "unknown";
}

bool is_tensor_kind(MemoryKind kind) {
  return kind == MemoryKind::kTorchBlock || kind == MemoryKind::kDeviceAsync;
}

bool occupies_device(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
    case MemoryKind::kDeviceAsync:
    case MemoryKind::kManaged:
    case MemoryKind::kVmmPhysical:
    case MemoryKind::kArray:
    case MemoryKind::kGraphExec:
      return true;
    // Host memory, address space, mappings of handles counted once as
    // kVmmPhysical, and torch blocks (inside driver segments, counted there).
    default:
      return false;
  }
}

std::uint8_t address_space(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kVmmPhysical:
      return 1;
    case MemoryKind::kVmmMapping:
      return 2;
    case MemoryKind::kAddressRange:
      return 3;
    case MemoryKind::kArray:
      return 4;
    case MemoryKind::kTorchBlock:
      return 5;
    case MemoryKind::kGraphExec:
      return 6;
    default:
      return 0;
  }
}

}  // namespace gpuleak::trace
