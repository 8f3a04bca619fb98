#include "monitor/pod_cgroup.h"

#include <cctype>
#include <vector>

namespace gpuleak::monitor {

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (;;) {
    std::size_t end = text.find(separator, at);
    parts.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) return parts;
    at = end + 1;
  }
}

// A UID in the 8-4-4-4-12 form, its separators all `separator`; returned
// lowercase with dashes, "" when it is not one.
std::string canonical_uid(const std::string& text, char separator) {
  static constexpr std::size_t kGroupEnds[] = {8, 13, 18, 23};
  if (text.size() != 36) return {};
  std::string uid = text;
  for (std::size_t i = 0; i < uid.size(); ++i) {
    bool is_separator_place = false;
    for (std::size_t end : kGroupEnds) is_separator_place = is_separator_place || i == end;
    if (is_separator_place) {
      if (uid[i] != separator) return {};
      uid[i] = '-';
    } else {
      if (!std::isxdigit(static_cast<unsigned char>(uid[i]))) return {};
      uid[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(uid[i])));
    }
  }
  return uid;
}

// The kubelet's root cgroup of pods: "kubepods" (cgroupfs), "kubepods.slice"
// (systemd); nested kubelets (kind) prefix "kubelet-".
bool is_pods_root(const std::string& part) {
  return part == "kubepods" || part == "kubepods.slice" || part == "kubelet-kubepods.slice";
}

bool is_qos_level(const std::string& part) {
  return part == "burstable" || part == "besteffort" || part == "kubepods-burstable.slice" ||
         part == "kubepods-besteffort.slice" || part == "kubelet-kubepods-burstable.slice" ||
         part == "kubelet-kubepods-besteffort.slice";
}

// "pod<uid>" (cgroupfs) or "[kubelet-]kubepods[-<qos>]-pod<uid_>.slice"
// (systemd, which cannot have '-' inside a name part, so the UID's dashes
// are '_'). The systemd name must repeat its parent's name: that is how
// systemd nests slices.
std::string uid_of_pod_part(const std::string& part, const std::string& parent) {
  if (part.starts_with("pod")) return canonical_uid(part.substr(3), '-');
  if (!parent.ends_with(".slice") || !part.ends_with(".slice")) return {};
  std::string expected_prefix = parent.substr(0, parent.size() - 6) + "-pod";
  if (!part.starts_with(expected_prefix)) return {};
  std::string uid_text = part.substr(expected_prefix.size());
  return canonical_uid(uid_text.substr(0, uid_text.size() - 6), '_');
}

// The pod UID in one cgroup path, "" unless the path has the kubelet's shape:
// a pods root, an optional QoS level, the pod, then exactly one container
// part below it.
std::string uid_in_path(const std::string& path) {
  std::vector<std::string> parts = split(path, '/');
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!is_pods_root(parts[i])) continue;
    std::size_t pod_at = i + 1;
    if (is_qos_level(parts[pod_at])) ++pod_at;
    if (pod_at + 2 != parts.size()) return {};  // the pod and one container under it
    if (parts[pod_at + 1].empty()) return {};
    return uid_of_pod_part(parts[pod_at], parts[pod_at - 1]);
  }
  return {};
}

}  // namespace

std::string pod_uid_from_cgroup(const std::string& cgroup_file_text) {
  // As for the container id: the unified (v2) line first, else any v1 line.
  std::string from_any_line;
  for (const std::string& line : split(cgroup_file_text, '\n')) {
    std::size_t first_colon = line.find(':');
    std::size_t second_colon =
        first_colon == std::string::npos ? std::string::npos : line.find(':', first_colon + 1);
    if (second_colon == std::string::npos) continue;
    std::string uid = uid_in_path(line.substr(second_colon + 1));
    if (uid.empty()) continue;
    if (line.starts_with("0::")) return uid;
    if (from_any_line.empty()) from_any_line = uid;
  }
  return from_any_line;
}

}  // namespace gpuleak::monitor
