#include "monitor/container_id.h"

#include <cctype>

namespace gpuleak::monitor {

namespace {

constexpr std::size_t kIdLength = 64;

bool is_hex_run(const std::string& text, std::size_t at) {
  if (at + kIdLength > text.size()) return false;
  for (std::size_t i = at; i < at + kIdLength; ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  // Exactly 64: a longer run of hex digits is something else.
  bool left_edge = at == 0 || !std::isxdigit(static_cast<unsigned char>(text[at - 1]));
  bool right_edge = at + kIdLength == text.size() ||
                    !std::isxdigit(static_cast<unsigned char>(text[at + kIdLength]));
  return left_edge && right_edge;
}

// The last 64-hex-digit run in one cgroup path: nested runtimes put the
// innermost container last.
std::string last_id_in(const std::string& path) {
  std::string found;
  for (std::size_t at = 0; at + kIdLength <= path.size(); ++at) {
    if (is_hex_run(path, at)) {
      found = path.substr(at, kIdLength);
      at += kIdLength - 1;
    }
  }
  for (char& c : found) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return found;
}

}  // namespace

std::string container_id_from_cgroup(const std::string& cgroup_file_text) {
  // Prefer the unified (v2) line "0::/..."; on v1 hosts any controller line names it.
  std::string from_any_line;
  std::size_t at = 0;
  while (at < cgroup_file_text.size()) {
    std::size_t end = cgroup_file_text.find('\n', at);
    if (end == std::string::npos) end = cgroup_file_text.size();
    std::string line = cgroup_file_text.substr(at, end - at);
    at = end + 1;
    std::size_t first_colon = line.find(':');
    std::size_t second_colon =
        first_colon == std::string::npos ? std::string::npos : line.find(':', first_colon + 1);
    if (second_colon == std::string::npos) continue;
    std::string id = last_id_in(line.substr(second_colon + 1));
    if (id.empty()) continue;
    if (line.compare(0, 3, "0::") == 0) return id;
    if (from_any_line.empty()) from_any_line = id;
  }
  return from_any_line;
}

std::string short_container_id(const std::string& container_id) {
  return container_id.substr(0, 12);
}

}  // namespace gpuleak::monitor
