// The memory maps of a process (/proc/PID/maps), for finding where an ELF
// file's code lies in it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuleak::attach {

struct Mapping {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t file_offset = 0;
  bool readable = false;
  bool executable = false;
  std::string path;  // "" for anonymous memory, "[stack]" and the like for the kernel's
};

// Empty when the file cannot be read (no such process, no permission).
std::vector<Mapping> read_process_maps(int pid);

// The address at which `file_offset` of the file at `path` is mapped, or 0.
std::uint64_t address_of_file_offset(const std::vector<Mapping>& maps, const std::string& path,
                                     std::uint64_t file_offset);

// `path` as the target sees it, opened from here: through /proc/PID/root,
// so a process in another mount namespace (a container) is read right.
std::string path_seen_from_here(int pid, const std::string& path);

}  // namespace gpuleak::attach
