#include "monitor/device_files.h"

#include <fnmatch.h>

#include <cstdlib>
#include <utility>

namespace gpuleak::monitor {

DeviceFilePattern::DeviceFilePattern(std::string glob) : glob_(std::move(glob)) {}

DeviceFilePattern DeviceFilePattern::from_flag_or_environment(const std::string& flag_value) {
  if (!flag_value.empty()) return DeviceFilePattern(flag_value);
  const char* from_environment = std::getenv(kDeviceFileGlobEnv);
  if (from_environment && *from_environment) return DeviceFilePattern(from_environment);
  return DeviceFilePattern(kDefaultDeviceFileGlob);
}

bool DeviceFilePattern::matches(const std::string& path) const {
  // FNM_PATHNAME: '*' stays inside one directory, so /dev/nvidia* does not
  // match files under some /dev/nvidia-caps/ subdirectory by accident.
  return fnmatch(glob_.c_str(), path.c_str(), FNM_PATHNAME) == 0;
}

}  // namespace gpuleak::monitor
