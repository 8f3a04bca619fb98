#include "attach/elf_symbols.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace gpuleak::attach {

namespace {

// Copies a struct out of the file's bytes (they carry no alignment).
template <class T>
bool read_at(const std::string& bytes, std::uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

bool valid_header(const std::string& bytes, Elf64_Ehdr* header) {
  return read_at(bytes, 0, header) && std::memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 &&
         header->e_ident[EI_CLASS] == ELFCLASS64 && header->e_machine == EM_X86_64;
}

}  // namespace

bool ElfSymbols::open(const std::string& path, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = "cannot read " + path;
    return false;
  }
  bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  Elf64_Ehdr header{};
  if (!valid_header(bytes_, &header)) {
    *why = path + " is not a 64-bit x86-64 ELF file";
    return false;
  }
  return true;
}

std::optional<std::uint64_t> ElfSymbols::file_offset_of_address(std::uint64_t address) const {
  Elf64_Ehdr header{};
  if (!read_at(bytes_, 0, &header)) return std::nullopt;
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    if (!read_at(bytes_, header.e_phoff + std::uint64_t{i} * header.e_phentsize, &segment)) break;
    if (segment.p_type != PT_LOAD) continue;
    if (address >= segment.p_vaddr && address < segment.p_vaddr + segment.p_filesz)
      return address - segment.p_vaddr + segment.p_offset;
  }
  return std::nullopt;
}

std::map<std::string, std::uint64_t> ElfSymbols::file_offsets_of(
    const std::vector<std::string>& names) const {
  std::map<std::string, std::uint64_t> found;
  Elf64_Ehdr header{};
  if (!read_at(bytes_, 0, &header)) return found;
  for (unsigned i = 0; i < header.e_shnum && found.size() < names.size(); ++i) {
    Elf64_Shdr table{};
    if (!read_at(bytes_, header.e_shoff + std::uint64_t{i} * header.e_shentsize, &table)) break;
    if (table.sh_type != SHT_DYNSYM && table.sh_type != SHT_SYMTAB) continue;
    Elf64_Shdr strings{};
    if (!read_at(bytes_, header.e_shoff + std::uint64_t{table.sh_link} * header.e_shentsize,
                 &strings))
      continue;
    std::uint64_t count = table.sh_entsize ? table.sh_size / table.sh_entsize : 0;
    for (std::uint64_t s = 0; s < count; ++s) {
      Elf64_Sym symbol{};
      if (!read_at(bytes_, table.sh_offset + s * table.sh_entsize, &symbol)) break;
      if (symbol.st_value == 0 || symbol.st_shndx == SHN_UNDEF) continue;
      std::uint64_t name_at = strings.sh_offset + symbol.st_name;
      if (name_at >= bytes_.size()) continue;
      const char* name = bytes_.c_str() + name_at;
      for (const std::string& wanted : names) {
        if (wanted != name || found.count(wanted)) continue;
        if (auto offset = file_offset_of_address(symbol.st_value)) found[wanted] = *offset;
      }
    }
  }
  return found;
}

bool is_x86_64_elf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(sizeof(Elf64_Ehdr), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return false;
  Elf64_Ehdr header{};
  return valid_header(bytes, &header);
}

}  // namespace gpuleak::attach
