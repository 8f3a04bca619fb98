#include "monitor/host_memory.h"

#include <sstream>
#include <string>

#include "monitor/proc_scanner.h"

namespace gpuleak::monitor {

HostMemory read_host_memory() {
  HostMemory memory;
  std::string text;
  if (!read_proc_file("/proc/meminfo", text)) return memory;
  std::istringstream lines(text);
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  bool have_total = false, have_available = false;
  while (lines >> key >> kib) {
    std::getline(lines, unit);
    if (key == "MemTotal:") {
      memory.total_bytes = kib * 1024;
      have_total = true;
    } else if (key == "MemAvailable:") {
      memory.available_bytes = kib * 1024;
      have_available = true;
    }
  }
  memory.known = have_total && have_available;
  return memory;
}

}  // namespace gpuleak::monitor
