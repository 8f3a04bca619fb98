// Finding CPython's C API in another process: the ELF file that defines
// Py_AddPendingCall (the executable, or a libpython it mapped), where its
// functions lie in the process, and which version it is.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <regex>
#include <set>

#include "attach/attach.h"
#include "attach/elf_symbols.h"
#include "attach/process_maps.h"

namespace gpuleak::attach {

namespace {

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// Py_Version (3.11 and later) holds PY_VERSION_HEX: 0xMMmmppRS.
bool read_version_word(int pid, std::uint64_t address, int* major, int* minor) {
  int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::uint32_t word = 0;
  bool ok = ::pread(fd, &word, sizeof word, static_cast<off_t>(address)) ==
            static_cast<ssize_t>(sizeof word);
  ::close(fd);
  if (!ok || (word >> 24) != 3) return false;
  *major = static_cast<int>(word >> 24);
  *minor = static_cast<int>((word >> 16) & 0xff);
  return true;
}

// "libpython3.11.so.1.0", "python3.12": the version in a file's name.
bool version_from_name(const std::string& name, int* major, int* minor) {
  static const std::regex kVersioned(R"(python(3)\.(\d+))");
  std::smatch match;
  if (!std::regex_search(name, match, kVersioned)) return false;
  *major = std::stoi(match[1].str());
  *minor = std::stoi(match[2].str());
  return true;
}

}  // namespace

bool find_python_interpreter(int pid, PythonInterpreter* found, std::string* why) {
  std::vector<Mapping> maps = read_process_maps(pid);
  if (maps.empty()) {
    *why = "cannot read the memory maps of PID " + std::to_string(pid);
    return false;
  }
  char exe_buffer[4096] = {};
  ssize_t n = ::readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe_buffer,
                         sizeof exe_buffer - 1);
  std::string exe = n > 0 ? std::string(exe_buffer, static_cast<std::size_t>(n)) : "";
  // libpython first: an executable that embeds Python maps it.
  std::vector<std::string> candidates;
  std::set<std::string> seen;
  for (const Mapping& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || !seen.insert(m.path).second) continue;
    if (base_name(m.path).starts_with("libpython3"))
      candidates.insert(candidates.begin(), m.path);
    else if (m.path == exe)
      candidates.push_back(m.path);
  }
  const std::vector<std::string> names = {"Py_AddPendingCall", "PyRun_SimpleString", "Py_Version"};
  for (const std::string& path : candidates) {
    ElfSymbols symbols;
    std::string unused;
    if (!symbols.open(path_seen_from_here(pid, path), &unused)) continue;
    auto offsets = symbols.file_offsets_of(names);
    if (!offsets.count("Py_AddPendingCall") || !offsets.count("PyRun_SimpleString")) continue;
    PythonInterpreter python;
    python.file = path;
    python.add_pending_call = address_of_file_offset(maps, path, offsets["Py_AddPendingCall"]);
    python.run_simple_string = address_of_file_offset(maps, path, offsets["PyRun_SimpleString"]);
    if (!python.add_pending_call || !python.run_simple_string) continue;
    bool versioned = false;
    if (offsets.count("Py_Version")) {
      std::uint64_t at = address_of_file_offset(maps, path, offsets["Py_Version"]);
      versioned = at && read_version_word(pid, at, &python.major, &python.minor);
    }
    if (!versioned) versioned = version_from_name(base_name(path), &python.major, &python.minor);
    if (!versioned) versioned = version_from_name(base_name(exe), &python.major, &python.minor);
    if (!versioned) {
      *why = "PID " + std::to_string(pid) + " runs CPython from " + path +
             ", but its version cannot be told (no Py_Version, no version in the file's name)";
      return false;
    }
    *found = python;
    return true;
  }
  *why = "PID " + std::to_string(pid) + " (" + base_name(exe) +
         ") is not a Python process: no CPython interpreter (Py_AddPendingCall) in its memory "
         "maps";
  return false;
}

}  // namespace gpuleak::attach
