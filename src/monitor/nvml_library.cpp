#include "monitor/nvml_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "monitor/nvml_declarations.h"

namespace gpuleak::monitor {

struct NvmlLibrary::Symbols {
  nvml::InitFn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  nvml::SystemGetDriverVersionFn driver_version = nullptr;  // optional
  nvml::DeviceGetCountFn device_count = nullptr;
  nvml::DeviceGetHandleByIndexFn handle_by_index = nullptr;
  nvml::DeviceGetUuidFn uuid = nullptr;
  nvml::DeviceGetNameFn name = nullptr;
  nvml::DeviceGetMemoryInfoFn memory = nullptr;
  nvml::DeviceGetMemoryInfoV2Fn memory_v2 = nullptr;  // optional (drivers >= 510)
  nvml::DeviceGetComputeRunningProcessesFn compute_processes = nullptr;
  nvml::DeviceGetMinorNumberFn minor_number = nullptr;  // optional: names /dev/nvidiaN
};

namespace {

template <typename Fn>
Fn lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

std::string c_string(const char* buffer, std::size_t capacity) {
  return std::string(buffer, strnlen(buffer, capacity));
}

// The byte the process list buffer is filled with before NVML writes it.
constexpr unsigned char kUnwrittenByte = 0xA5;

// How many bytes the driver wrote per entry of the process list. Drivers of
// the CUDA 12.2 era write 32-byte entries through the _v3 call where others
// write 24 (see nvml_declarations.h); reading one layout as the other turns
// every entry after the first into garbage, so the stride is measured: the
// buffer was filled with kUnwrittenByte, and `listed` entries end where the
// driver's writing ends (the last field of either layout is never all
// kUnwrittenByte: instance ids are 0xFFFFFFFF or small, the protected-memory
// count is a byte count). Falls back to the 24-byte layout.
std::size_t process_info_stride(const std::vector<unsigned char>& buffer, unsigned listed) {
  constexpr std::size_t kDefault = sizeof(nvml::ProcessInfo);
  if (listed == 0) return kDefault;
  std::size_t written = buffer.size();
  while (written > 0 && buffer[written - 1] == kUnwrittenByte) --written;
  for (std::size_t stride : {std::size_t{24}, std::size_t{32}, std::size_t{16}}) {
    if (written == stride * listed) return stride;
  }
  return kDefault;
}

}  // namespace

NvmlLibrary::NvmlLibrary() : symbols_(std::make_unique<Symbols>()) {
  if (!open_library() || !resolve_symbols()) return;
  nvml::Return rc = symbols_->init();
  if (rc != nvml::kSuccess) {
    unavailable_reason_ =
        fmt::format("NVML did not start ({}). The NVIDIA driver is not loaded or not usable here.",
                    describe(rc));
    return;
  }
  initialized_ = true;
  if (symbols_->driver_version) {
    char version[nvml::kDriverVersionBufferSize] = {};
    if (symbols_->driver_version(version, sizeof version) == nvml::kSuccess) {
      driver_version_ = c_string(version, sizeof version);
    }
  }
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) symbols_->shutdown();
  if (handle_) dlclose(handle_);
}

bool NvmlLibrary::open_library() {
  const char* override_path = std::getenv(kNvmlLibraryEnv);
  library_path_ = (override_path && *override_path) ? override_path : kNvmlDefaultLibrary;
  handle_ = dlopen(library_path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    unavailable_reason_ = fmt::format(
        "NVML is not available: {} could not be loaded ({}). Is the NVIDIA driver installed?",
        library_path_, why ? why : "unknown reason");
    return false;
  }
  return true;
}

bool NvmlLibrary::resolve_symbols() {
  Symbols& s = *symbols_;
  s.init = lookup<nvml::InitFn>(handle_, "nvmlInit_v2");
  s.shutdown = lookup<nvml::ShutdownFn>(handle_, "nvmlShutdown");
  s.error_string = lookup<nvml::ErrorStringFn>(handle_, "nvmlErrorString");
  s.driver_version = lookup<nvml::SystemGetDriverVersionFn>(handle_, "nvmlSystemGetDriverVersion");
  s.device_count = lookup<nvml::DeviceGetCountFn>(handle_, "nvmlDeviceGetCount_v2");
  s.handle_by_index =
      lookup<nvml::DeviceGetHandleByIndexFn>(handle_, "nvmlDeviceGetHandleByIndex_v2");
  s.uuid = lookup<nvml::DeviceGetUuidFn>(handle_, "nvmlDeviceGetUUID");
  s.name = lookup<nvml::DeviceGetNameFn>(handle_, "nvmlDeviceGetName");
  s.memory = lookup<nvml::DeviceGetMemoryInfoFn>(handle_, "nvmlDeviceGetMemoryInfo");
  s.memory_v2 = lookup<nvml::DeviceGetMemoryInfoV2Fn>(handle_, "nvmlDeviceGetMemoryInfo_v2");
  s.compute_processes = lookup<nvml::DeviceGetComputeRunningProcessesFn>(
      handle_, "nvmlDeviceGetComputeRunningProcesses_v3");
  s.minor_number = lookup<nvml::DeviceGetMinorNumberFn>(handle_, "nvmlDeviceGetMinorNumber");
  if (!s.compute_processes) {
    // Drivers before r510 have only _v2, which writes the same layout.
    s.compute_processes = lookup<nvml::DeviceGetComputeRunningProcessesFn>(
        handle_, "nvmlDeviceGetComputeRunningProcesses_v2");
  }
  std::vector<const char*> missing;
  if (!s.init) missing.push_back("nvmlInit_v2");
  if (!s.shutdown) missing.push_back("nvmlShutdown");
  if (!s.device_count) missing.push_back("nvmlDeviceGetCount_v2");
  if (!s.handle_by_index) missing.push_back("nvmlDeviceGetHandleByIndex_v2");
  if (!s.uuid) missing.push_back("nvmlDeviceGetUUID");
  if (!s.name) missing.push_back("nvmlDeviceGetName");
  if (!s.memory) missing.push_back("nvmlDeviceGetMemoryInfo");
  if (!s.compute_processes) missing.push_back("nvmlDeviceGetComputeRunningProcesses_v3");
  if (missing.empty()) return true;
  unavailable_reason_ = fmt::format(
      "NVML is not usable: {} lacks {}. The driver is too old, or the file is not NVML.",
      library_path_, fmt::join(missing, ", "));
  return false;
}

std::string NvmlLibrary::describe(int nvml_return) const {
  const char* text = symbols_->error_string ? symbols_->error_string(nvml_return) : nullptr;
  if (text && *text) return fmt::format("{}, NVML error {}", text, nvml_return);
  return fmt::format("NVML error {}", nvml_return);
}

GpuReadResult NvmlLibrary::read_devices() const {
  GpuReadResult result;
  if (!initialized_) {
    result.error = unavailable_reason_;
    return result;
  }
  const Symbols& s = *symbols_;
  unsigned count = 0;
  nvml::Return rc = s.device_count(&count);
  if (rc != nvml::kSuccess) {
    result.error = fmt::format("cannot count GPUs: {}", describe(rc));
    return result;
  }
  for (unsigned index = 0; index < count; ++index) {
    nvml::Device device = nullptr;
    rc = s.handle_by_index(index, &device);
    if (rc != nvml::kSuccess) {
      result.error = fmt::format("GPU {}: {}", index, describe(rc));
      continue;
    }
    GpuDevice reading;
    reading.index = index;
    char text[nvml::kUuidBufferSize > nvml::kNameBufferSize ? nvml::kUuidBufferSize
                                                            : nvml::kNameBufferSize] = {};
    if (s.uuid(device, text, nvml::kUuidBufferSize) == nvml::kSuccess) {
      reading.uuid = c_string(text, sizeof text);
    }
    std::memset(text, 0, sizeof text);
    if (s.name(device, text, nvml::kNameBufferSize) == nvml::kSuccess) {
      reading.name = c_string(text, sizeof text);
    }
    if (reading.uuid.empty()) reading.uuid = fmt::format("GPU-index-{}", index);
    unsigned minor = 0;
    if (s.minor_number && s.minor_number(device, &minor) == nvml::kSuccess)
      reading.minor_number = minor;

    nvml::MemoryV2 memory_v2{};
    memory_v2.version = nvml::kMemoryV2Version;
    if (s.memory_v2 && s.memory_v2(device, &memory_v2) == nvml::kSuccess) {
      reading.memory_total_bytes = memory_v2.total;
      reading.memory_used_bytes = memory_v2.used;
      reading.memory_reserved_bytes = memory_v2.reserved;
      reading.reserved_reported = true;
    } else {
      nvml::Memory memory{};
      rc = s.memory(device, &memory);
      if (rc != nvml::kSuccess) {
        result.error = fmt::format("GPU {} memory: {}", index, describe(rc));
        continue;
      }
      reading.memory_total_bytes = memory.total;
      reading.memory_used_bytes = memory.used;
    }

    // Ask with room to spare; grow and retry when processes start between calls.
    unsigned capacity = 64;
    for (int attempt = 0; attempt < 4; ++attempt) {
      std::vector<unsigned char> buffer(
          static_cast<std::size_t>(capacity) * nvml::kLargestProcessInfoBytes, kUnwrittenByte);
      unsigned listed = capacity;
      rc =
          s.compute_processes(device, &listed, reinterpret_cast<nvml::ProcessInfo*>(buffer.data()));
      if (rc == nvml::kErrorInsufficientSize) {
        capacity = listed + 32;
        continue;
      }
      if (rc != nvml::kSuccess) {
        reading.process_list_error = describe(rc);
        break;
      }
      listed = std::min(listed, capacity);
      std::size_t stride = process_info_stride(buffer, listed);
      for (unsigned i = 0; i < listed; ++i) {
        const unsigned char* entry = buffer.data() + i * stride;
        unsigned int pid = 0;
        unsigned long long used = 0;
        std::memcpy(&pid, entry + offsetof(nvml::ProcessInfo, pid), sizeof pid);
        std::memcpy(&used, entry + offsetof(nvml::ProcessInfo, usedGpuMemory), sizeof used);
        GpuProcessUsage usage;
        usage.pid = static_cast<int>(pid);
        if (used != nvml::kValueNotAvailable) usage.memory_bytes = used;
        reading.processes.push_back(usage);
      }
      break;
    }
    result.devices.push_back(std::move(reading));
  }
  return result;
}

}  // namespace gpuleak::monitor
