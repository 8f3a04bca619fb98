#include "monitor/pod_attribution.h"

#include <optional>
#include <set>
#include <tuple>

namespace gpuleak::monitor {

namespace {

// Who a GPU was allocated to.
struct Owner {
  std::string namespace_name;
  std::string pod;
  std::string container;
  auto key() const { return std::tie(namespace_name, pod, container); }
  bool operator<(const Owner& other) const { return key() < other.key(); }
  bool operator==(const Owner& other) const { return key() == other.key(); }
};

// A container as the cgroup path names it.
using CgroupContainer = std::pair<std::string, std::string>;  // pod UID, container id

bool in_pod(const ProcessView& process) { return process.visible && !process.info.pod_uid.empty(); }

// The one owner of every GPU `process` holds, when the allocations and the
// other processes on those GPUs allow no other reading.
std::optional<Owner> sole_owner(
    const ProcessView& process, const std::map<std::string, std::set<Owner>>& owners_by_gpu,
    const std::map<std::string, std::set<CgroupContainer>>& users_by_gpu) {
  std::optional<Owner> found;
  for (const auto& use : process.gpu) {
    auto owners = owners_by_gpu.find(use.device_uuid);
    if (owners == owners_by_gpu.end() || owners->second.size() != 1) return std::nullopt;
    const Owner& owner = *owners->second.begin();
    if (found && !(*found == owner)) return std::nullopt;
    found = owner;
    if (users_by_gpu.at(use.device_uuid).size() != 1) return std::nullopt;
  }
  return found;
}

}  // namespace

PodNamesByPid attribute_pods(const Sample& sample, const KubeletPodNames* by_logs,
                             const std::vector<GpuAllocation>* allocations) {
  std::map<std::string, std::set<Owner>> owners_by_gpu;
  if (allocations) {
    for (const auto& gpu : *allocations)
      owners_by_gpu[gpu.device_uuid].insert({gpu.namespace_name, gpu.pod, gpu.container});
  }
  // Every container on each GPU, as the cgroup paths tell; a process whose
  // path has no pod counts as one more, so a host process on a GPU also
  // keeps the GPU's owner from naming anyone.
  std::map<std::string, std::set<CgroupContainer>> users_by_gpu;
  for (const auto& process : sample.processes) {
    CgroupContainer who = in_pod(process)
                              ? CgroupContainer{process.info.pod_uid, process.info.container_id}
                              : CgroupContainer{"", std::to_string(process.pid)};
    for (const auto& use : process.gpu) users_by_gpu[use.device_uuid].insert(who);
  }

  PodNamesByPid names_by_pid;
  for (const auto& process : sample.processes) {
    if (!in_pod(process)) continue;
    std::optional<PodNames> from_logs;
    if (by_logs) from_logs = by_logs->find(process.info.pod_uid, process.info.container_id);
    std::optional<Owner> owner;
    if (allocations && !process.gpu.empty())
      owner = sole_owner(process, owners_by_gpu, users_by_gpu);

    if (owner && from_logs) {
      if (owner->namespace_name != from_logs->namespace_name || owner->pod != from_logs->pod)
        continue;  // two sources disagree: no pod rather than a guess
      PodNames names = *from_logs;
      if (names.container.empty()) names.container = owner->container;
      names_by_pid[process.pid] = names;
    } else if (owner) {
      names_by_pid[process.pid] = PodNames{owner->namespace_name, owner->pod, owner->container};
    } else if (from_logs) {
      names_by_pid[process.pid] = *from_logs;
    }
  }
  return names_by_pid;
}

}  // namespace gpuleak::monitor
