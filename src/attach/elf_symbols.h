// The symbols of one ELF file (its .dynsym and .symtab), as file offsets:
// where a function's first byte lies in the file, which maps to an address
// in a process through its memory maps (process_maps.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::attach {

class ElfSymbols {
 public:
  // Reads `path`; false with `why` when it is no 64-bit x86-64 ELF file.
  bool open(const std::string& path, std::string* why);

  // The file offset of each of `names` that the file defines (functions and
  // objects with a value); names it lacks are absent from the result.
  std::map<std::string, std::uint64_t> file_offsets_of(const std::vector<std::string>& names) const;

 private:
  std::optional<std::uint64_t> file_offset_of_address(std::uint64_t address) const;

  std::string bytes_;
};

// Whether the ELF file at `path` is x86-64 code (false for 32-bit, ARM...,
// and for files that cannot be read).
bool is_x86_64_elf(const std::string& path);

}  // namespace gpuleak::attach
