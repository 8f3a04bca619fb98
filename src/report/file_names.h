// File names as the reports show them.
#pragma once

#include <string>

namespace gpuleak::report {

// The last part of a path: "train.py" for "/job/train.py"; the path itself
// when it has no '/'.
inline std::string base_name(const std::string& path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace gpuleak::report
