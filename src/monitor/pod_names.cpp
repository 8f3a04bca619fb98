#include "monitor/pod_names.h"

#include <dirent.h>

#include <cctype>
#include <vector>

#include "monitor/pod_cgroup.h"

namespace gpuleak::monitor {

namespace {

constexpr std::size_t kContainerIdLength = 64;

std::vector<std::string> split_underscores(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (;;) {
    std::size_t end = text.find('_', at);
    parts.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) return parts;
    at = end + 1;
  }
}

// A DNS label or subdomain as Kubernetes names use them: lowercase letters,
// digits, '-' and '.'; nothing else may reach a label value.
bool is_kubernetes_name(const std::string& text) {
  if (text.empty() || text.size() > 253) return false;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool is_container_id(const std::string& text) {
  if (text.size() != kContainerIdLength) return false;
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) ||
        std::isupper(static_cast<unsigned char>(c)))
      return false;
  }
  return true;
}

std::vector<std::string> directory_names(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (!dir) return names;
  while (const dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  closedir(dir);
  return names;
}

}  // namespace

std::optional<PodDirectoryName> parse_pod_directory_name(const std::string& name) {
  std::vector<std::string> parts = split_underscores(name);
  if (parts.size() != 3) return std::nullopt;
  if (!is_kubernetes_name(parts[0]) || !is_kubernetes_name(parts[1])) return std::nullopt;
  // The same UID form the cgroup path gives, so the two can be matched.
  std::string uid = pod_uid_from_cgroup("0::/kubepods/pod" + parts[2] + "/c");
  if (uid.empty() || uid != parts[2]) return std::nullopt;
  return PodDirectoryName{parts[0], parts[1], uid};
}

std::optional<ContainerLogName> parse_container_log_name(const std::string& name) {
  const std::string suffix = ".log";
  if (name.size() <= suffix.size() + kContainerIdLength + 1 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  std::string stem = name.substr(0, name.size() - suffix.size());
  std::string id = stem.substr(stem.size() - kContainerIdLength);
  if (!is_container_id(id) || stem[stem.size() - kContainerIdLength - 1] != '-')
    return std::nullopt;
  std::vector<std::string> parts =
      split_underscores(stem.substr(0, stem.size() - kContainerIdLength - 1));
  if (parts.size() != 3) return std::nullopt;
  for (const auto& part : parts) {
    if (!is_kubernetes_name(part)) return std::nullopt;
  }
  return ContainerLogName{parts[0], parts[1], parts[2], id};
}

KubeletPodNames::KubeletPodNames(std::string log_root) : log_root_(std::move(log_root)) {}

void KubeletPodNames::refresh() {
  pods_by_uid_.clear();
  containers_by_id_.clear();
  if (log_root_.empty()) return;
  for (const auto& name : directory_names(log_root_ + "/pods")) {
    if (auto pod = parse_pod_directory_name(name)) pods_by_uid_[pod->uid] = *pod;
  }
  for (const auto& name : directory_names(log_root_ + "/containers")) {
    if (auto container = parse_container_log_name(name))
      containers_by_id_[container->container_id] = *container;
  }
}

std::optional<PodNames> KubeletPodNames::find(const std::string& pod_uid,
                                              const std::string& container_id) const {
  auto pod = pods_by_uid_.find(pod_uid);
  if (pod_uid.empty() || pod == pods_by_uid_.end()) return std::nullopt;
  PodNames names{pod->second.namespace_name, pod->second.pod, {}};
  auto container = containers_by_id_.find(container_id);
  if (!container_id.empty() && container != containers_by_id_.end() &&
      container->second.pod == names.pod &&
      container->second.namespace_name == names.namespace_name)
    names.container = container->second.container;
  return names;
}

}  // namespace gpuleak::monitor
