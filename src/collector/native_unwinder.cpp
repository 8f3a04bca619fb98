#include "collector/native_unwinder.h"

#include <link.h>

#include <algorithm>

namespace gpuleak::collector {

namespace {

// Address range of the collector's own text, to drop our frames.
std::uintptr_t g_self_low = 0;
std::uintptr_t g_self_high = 0;

int find_self(struct dl_phdr_info* info, size_t, void* data) {
  auto probe = reinterpret_cast<std::uintptr_t>(data);
  std::uintptr_t low = UINTPTR_MAX, high = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    low = std::min(low, start);
    high = std::max(high, start + ph.p_memsz);
  }
  if (probe >= low && probe < high) {
    g_self_low = low;
    g_self_high = high;
    return 1;
  }
  return 0;
}

}  // namespace

bool g_reuse_stacks = false;

void prepare_native_unwinder(bool reuse_stacks) {
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  dl_iterate_phdr(find_self, reinterpret_cast<void*>(&prepare_native_unwinder));
  g_reuse_stacks = reuse_stacks;
}

bool is_collector_frame(std::uintptr_t ip) { return ip >= g_self_low && ip < g_self_high; }

int keep_program_frames(void* const* raw, int count, std::uint64_t* frames, int max_frames) {
  int i = 0;
  while (i < count) {
    if (!is_collector_frame(reinterpret_cast<std::uintptr_t>(raw[i]))) break;
    ++i;
  }
  int out = 0;
  for (; i < count && out < max_frames; ++i)
    frames[out++] = reinterpret_cast<std::uintptr_t>(raw[i]);
  return out;
}

}  // namespace gpuleak::collector
