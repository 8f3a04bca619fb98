// Symbols of ELF files as file offsets, checked against this process's own
// C library, whose functions the dynamic linker resolved.
#include "attach/elf_symbols.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "attach/process_maps.h"

namespace gpuleak::attach {
namespace {

TEST(ElfSymbols, a_c_library_function_maps_to_the_address_the_linker_resolved) {
  void* putenv_address = ::dlsym(RTLD_DEFAULT, "putenv");
  ASSERT_NE(putenv_address, nullptr);
  auto address = reinterpret_cast<std::uint64_t>(putenv_address);
  std::vector<Mapping> maps = read_process_maps(static_cast<int>(::getpid()));
  std::string library;  // as the maps name it (the loader's name may go through a symlink)
  for (const Mapping& m : maps) {
    if (address >= m.start && address < m.end) library = m.path;
  }
  ASSERT_FALSE(library.empty());
  ElfSymbols symbols;
  std::string why;
  ASSERT_TRUE(symbols.open(library, &why)) << why;
  auto offsets = symbols.file_offsets_of({"putenv", "no_such_function_anywhere"});
  ASSERT_EQ(offsets.count("putenv"), 1u);
  EXPECT_EQ(offsets.count("no_such_function_anywhere"), 0u);
  EXPECT_EQ(address_of_file_offset(maps, library, offsets["putenv"]), address);
}

TEST(ElfSymbols, a_file_that_is_not_elf_is_refused) {
  ElfSymbols symbols;
  std::string why;
  EXPECT_FALSE(symbols.open("/proc/self/status", &why));
  EXPECT_NE(why.find("not a 64-bit x86-64 ELF file"), std::string::npos) << why;
  EXPECT_FALSE(is_x86_64_elf("/proc/self/status"));
  EXPECT_TRUE(is_x86_64_elf("/proc/self/exe"));
}

}  // namespace
}  // namespace gpuleak::attach
