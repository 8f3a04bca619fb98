#include "cli/install_layout.h"

#include <cstdlib>
#include <filesystem>

namespace gpuleak::cli {

namespace fs = std::filesystem;

InstallLayout locate_install() {
  InstallLayout layout;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  fs::path dir = ec ? fs::current_path() : self.parent_path();
  for (const fs::path& candidate :
       {dir / "libgpuleak_collector.so", dir / "lib" / "libgpuleak_collector.so",
        dir / ".." / "lib" / "gpuleak" / "libgpuleak_collector.so"}) {
    if (fs::exists(candidate, ec)) {
      layout.collector = fs::canonical(candidate, ec).string();
      break;
    }
  }
  for (const fs::path& candidate : {dir / "python", dir / ".." / "share" / "gpuleak" / "python"}) {
    if (fs::exists(candidate / "gpuleak" / "__init__.py", ec)) {
      layout.python_dir = fs::canonical(candidate, ec).string();
      break;
    }
  }
  if (const char* c = std::getenv("GPULEAK_COLLECTOR"); c && *c) layout.collector = c;
  if (const char* p = std::getenv("GPULEAK_PYTHON_DIR"); p && *p) layout.python_dir = p;
  if (!layout.collector.empty()) {
    fs::path interposer = fs::path(layout.collector).parent_path() / "libgpuleak_interposer.so";
    if (fs::exists(interposer, ec)) layout.interposer = interposer.string();
  }
  return layout;
}

}  // namespace gpuleak::cli
