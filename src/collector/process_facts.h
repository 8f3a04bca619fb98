// Facts about the traced process that the recorder writes into its trace:
// who it is, which ELF objects are loaded (for offline symbolization), how
// much host memory it holds, and its threads' names.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trace/records.h"

namespace gpuleak::collector {

trace::ProcessRecord describe_process(std::uint64_t monotonic_ns);

// Resident set size from /proc/self/statm; 0 if unreadable.
std::uint64_t host_rss_bytes();

// The kernel's name of a thread of this process ("" if unreadable).
std::string thread_name(std::uint32_t thread_id);

// Calls `visit` for each loaded ELF object with a file behind it.
// Returns dl_iterate_phdr's count of objects ever added, so callers can skip
// rescans when nothing changed.
unsigned long long for_each_loaded_module(
    const std::function<void(const trace::ModuleRecord&)>& visit);
unsigned long long loaded_module_generation();

}  // namespace gpuleak::collector
