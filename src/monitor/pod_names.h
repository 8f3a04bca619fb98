// Names of the pods on this node, read from the kubelet's log directories.
//
// The cgroup path gives a process's pod UID and container id
// (pod_cgroup.h, container_id.h); people need names. The kubelet writes
// every container's log under two directories whose names carry them:
//   <root>/pods/<namespace>_<pod>_<pod uid>/<container>/    (one per pod)
//   <root>/containers/<pod>_<namespace>_<container>-<container id>.log
// Pod, namespace and container names are DNS labels or subdomains, which
// cannot hold '_', so both names split without ambiguity. These directories
// exist on every node with a CRI runtime (containerd, CRI-O), are readable
// from a DaemonSet through a read-only hostPath, and need neither the API
// server nor the kubelet's pod-resources socket (pod_resources.h, which
// lists only pods that requested a device; pod_attribution.h weighs the
// two).
//
// A pod UID not found here gives no names (never a guess); a container id
// whose log name disagrees with the pod found by UID gives no container.
//
// Not thread-safe: one thread refreshes and looks up.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace gpuleak::monitor {

struct PodNames {
  std::string namespace_name;
  std::string pod;
  std::string container;  // empty when the container's log name was not found
};

// "<namespace>_<pod>_<uid>" -> namespace, pod and uid; nullopt for other names.
struct PodDirectoryName {
  std::string namespace_name;
  std::string pod;
  std::string uid;
};
std::optional<PodDirectoryName> parse_pod_directory_name(const std::string& name);

// "<pod>_<namespace>_<container>-<64 hex>.log" -> names and the id.
struct ContainerLogName {
  std::string pod;
  std::string namespace_name;
  std::string container;
  std::string container_id;
};
std::optional<ContainerLogName> parse_container_log_name(const std::string& name);

class KubeletPodNames {
 public:
  // `log_root` is the kubelet's log root ("/var/log" on a node); empty
  // turns the lookup off.
  explicit KubeletPodNames(std::string log_root);

  // Re-reads both directory listings (two readdirs; no file is opened).
  void refresh();

  // The names of the pod `pod_uid`, with the container named by
  // `container_id` when known; nullopt when the UID is not on this node.
  std::optional<PodNames> find(const std::string& pod_uid, const std::string& container_id) const;

  const std::string& log_root() const { return log_root_; }

 private:
  std::string log_root_;
  std::map<std::string, PodDirectoryName> pods_by_uid_;
  std::map<std::string, ContainerLogName> containers_by_id_;
};

}  // namespace gpuleak::monitor
