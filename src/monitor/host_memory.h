// Host RAM totals from /proc/meminfo, to say how long until a growing
// process's RSS would exhaust it.
#pragma once

#include <cstdint>

namespace gpuleak::monitor {

struct HostMemory {
  std::uint64_t total_bytes = 0;
  std::uint64_t available_bytes = 0;  // MemAvailable: what can be allocated without swapping
  bool known = false;
};

HostMemory read_host_memory();

}  // namespace gpuleak::monitor
