// Which open files count as a handle to a GPU.
//
// A process that uses CUDA keeps /dev/nvidiactl, /dev/nvidia-uvm and
// /dev/nvidiaN open for as long as its context lives, so an open handle is
// evidence of a context even where the driver lists no memory for the
// process (another PID namespace, MIG, no NVML). The pattern is a glob on
// the path an fd points to; tests and unusual setups replace it with the
// GPULEAK_DEVICE_FILE_GLOB variable or the hidden --device-files flag.
//
// Immutable after construction; safe to share between threads.
#pragma once

#include <string>

namespace gpuleak::monitor {

inline constexpr const char* kDeviceFileGlobEnv = "GPULEAK_DEVICE_FILE_GLOB";
inline constexpr const char* kDefaultDeviceFileGlob = "/dev/nvidia*";

class DeviceFilePattern {
 public:
  explicit DeviceFilePattern(std::string glob);
  // The flag's value when given, else the environment variable, else /dev/nvidia*.
  static DeviceFilePattern from_flag_or_environment(const std::string& flag_value);

  // True when `path` (an fd's link target) names a GPU device file.
  bool matches(const std::string& path) const;
  const std::string& glob() const { return glob_; }

 private:
  std::string glob_;
};

}  // namespace gpuleak::monitor
