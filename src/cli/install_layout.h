// Where gpuleak's own parts are, relative to the running binary, so a build
// folder or a copied bundle works without installation:
//   <dir>/gpuleak, <dir>/libgpuleak_collector.so or <dir>/lib/..., <dir>/python/;
// the driver interposer (libgpuleak_interposer.so) beside the collector.
#pragma once

#include <string>

namespace gpuleak::cli {

struct InstallLayout {
  std::string collector;   // absolute path, empty if not found
  std::string interposer;  // libgpuleak_interposer.so beside the collector, empty if not there
  std::string python_dir;  // folder holding the gpuleak package, empty if not found
};

// GPULEAK_COLLECTOR and GPULEAK_PYTHON_DIR override what is found; the
// interposer is looked for beside the collector that was chosen.
InstallLayout locate_install();

}  // namespace gpuleak::cli
