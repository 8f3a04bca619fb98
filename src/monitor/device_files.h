// Which open files count as a handle to a GPU.
//
// A process that uses CUDA keeps /dev/nvidiactl, /dev/nvidia-uvm and
// /dev/nvidiaN open for as long as its context lives, so an open handle is
// evidence of a context even where the driver lists no memory for the
// process (another PID namespace, MIG, no NVML). The pattern is a glob on
// the path an fd points to; tests and unusual setups replace it with the
// --device-files flag or the GPULEAK_DEVICE_FILE_GLOB variable. Because the
// pattern decides which processes count as GPU holders, and so which ones
// `doctor --kill-orphans` may end, the variable alone never widens the kill
// set (only the flag does), and a changed pattern is always announced.
//
// Immutable after construction; safe to share between threads.
#pragma once

#include <string>

namespace gpuleak::monitor {

inline constexpr const char* kDeviceFileGlobEnv = "GPULEAK_DEVICE_FILE_GLOB";
inline constexpr const char* kDefaultDeviceFileGlob = "/dev/nvidia*";

class DeviceFilePattern {
 public:
  enum class Origin { kDefault, kFlag, kEnvironment };

  explicit DeviceFilePattern(std::string glob, Origin origin = Origin::kFlag);
  // The flag's value when given, else (when `environment_allowed`) the
  // environment variable, else /dev/nvidia*.
  static DeviceFilePattern from_flag_or_environment(const std::string& flag_value,
                                                    bool environment_allowed = true);

  // True when `path` (an fd's link target) names a GPU device file.
  bool matches(const std::string& path) const;
  const std::string& glob() const { return glob_; }
  Origin origin() const { return origin_; }
  bool is_default() const { return glob_ == kDefaultDeviceFileGlob; }
  // "GPU device files are those matching '<glob>' (from --device-files), not
  // the default /dev/nvidia*", or "" for the default: what every command
  // says on stderr when the pattern was changed.
  std::string change_notice() const;

 private:
  std::string glob_;
  Origin origin_;
};

}  // namespace gpuleak::monitor
