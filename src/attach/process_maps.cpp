#include "attach/process_maps.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace gpuleak::attach {

std::vector<Mapping> read_process_maps(int pid) {
  std::vector<Mapping> maps;
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    // start-end perms offset dev inode [path]
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode;
    if (!(fields >> range >> perms >> offset >> device >> inode)) continue;
    Mapping m;
    auto dash = range.find('-');
    if (dash == std::string::npos) continue;
    m.start = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    m.file_offset = std::stoull(offset, nullptr, 16);
    m.readable = !perms.empty() && perms[0] == 'r';
    m.executable = perms.size() > 2 && perms[2] == 'x';
    std::getline(fields >> std::ws, m.path);
    // A file deleted since it was mapped keeps its old name with this suffix.
    const std::string deleted = " (deleted)";
    if (m.path.size() > deleted.size() && m.path.ends_with(deleted))
      m.path.resize(m.path.size() - deleted.size());
    maps.push_back(std::move(m));
  }
  return maps;
}

std::uint64_t address_of_file_offset(const std::vector<Mapping>& maps, const std::string& path,
                                     std::uint64_t file_offset) {
  for (const Mapping& m : maps) {
    if (m.path != path || file_offset < m.file_offset) continue;
    std::uint64_t into = file_offset - m.file_offset;
    if (into < m.end - m.start) return m.start + into;
  }
  return 0;
}

std::string path_seen_from_here(int pid, const std::string& path) {
  std::string through_root = "/proc/" + std::to_string(pid) + "/root" + path;
  if (::access(through_root.c_str(), R_OK) == 0) return through_root;
  return path;
}

}  // namespace gpuleak::attach
