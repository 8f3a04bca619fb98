// NVML, opened at run time.
//
// The library is loaded with dlopen (libnvidia-ml.so.1, or the file named by
// GPULEAK_NVML_LIBRARY) so gpuleak starts on machines without an NVIDIA
// driver; there it reports why NVML is unavailable and the /proc side of the
// monitor still works. Only the functions in nvml_declarations.h are used.
//
// Ownership: the object owns the dlopen handle and the nvmlInit/nvmlShutdown
// pair; not copyable or movable. Thread-safety: NVML itself is thread-safe,
// but one NvmlLibrary is meant to be read from one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "monitor/gpu_devices.h"

namespace gpuleak::monitor {

// The environment variable that names another NVML library file (tests use a
// stand-in library; it also helps on systems with an unusual driver layout).
inline constexpr const char* kNvmlLibraryEnv = "GPULEAK_NVML_LIBRARY";
inline constexpr const char* kNvmlDefaultLibrary = "libnvidia-ml.so.1";

struct GpuReadResult {
  std::vector<GpuDevice> devices;
  std::string error;  // empty on success; devices may still be partly filled
};

class NvmlLibrary {
 public:
  // Opens and initializes NVML; never throws. Check available() afterwards.
  NvmlLibrary();
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool available() const { return initialized_; }
  // Why NVML cannot be used, worded for a person; empty when available().
  const std::string& unavailable_reason() const { return unavailable_reason_; }
  // The library file that was opened (or tried).
  const std::string& library_path() const { return library_path_; }
  // "580.65.06", or empty when the driver did not say.
  const std::string& driver_version() const { return driver_version_; }

  // Memory and processes of every device. Requires available().
  GpuReadResult read_devices() const;

 private:
  struct Symbols;
  std::string describe(int nvml_return) const;
  bool open_library();
  bool resolve_symbols();

  void* handle_ = nullptr;
  std::unique_ptr<Symbols> symbols_;
  bool initialized_ = false;
  std::string unavailable_reason_;
  std::string library_path_;
  std::string driver_version_;
};

}  // namespace gpuleak::monitor
