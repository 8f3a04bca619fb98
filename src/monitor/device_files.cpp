#include "monitor/device_files.h"

#include <fnmatch.h>

#include <cstdlib>
#include <utility>

namespace gpuleak::monitor {

DeviceFilePattern::DeviceFilePattern(std::string glob, Origin origin)
    : glob_(std::move(glob)), origin_(origin) {}

DeviceFilePattern DeviceFilePattern::from_flag_or_environment(const std::string& flag_value,
                                                              bool environment_allowed) {
  if (!flag_value.empty()) return DeviceFilePattern(flag_value, Origin::kFlag);
  const char* from_environment = std::getenv(kDeviceFileGlobEnv);
  if (environment_allowed && from_environment && *from_environment)
    return DeviceFilePattern(from_environment, Origin::kEnvironment);
  return DeviceFilePattern(kDefaultDeviceFileGlob, Origin::kDefault);
}

std::string DeviceFilePattern::change_notice() const {
  if (is_default()) return {};
  return std::string("GPU device files are those matching '") + glob_ + "' (from " +
         (origin_ == Origin::kEnvironment ? std::string(kDeviceFileGlobEnv) : "--device-files") +
         "), not the default " + kDefaultDeviceFileGlob;
}

bool DeviceFilePattern::matches(const std::string& path) const {
  // FNM_PATHNAME: '*' stays inside one directory, so /dev/nvidia* does not
  // match files under some /dev/nvidia-caps/ subdirectory by accident.
  return fnmatch(glob_.c_str(), path.c_str(), FNM_PATHNAME) == 0;
}

}  // namespace gpuleak::monitor
