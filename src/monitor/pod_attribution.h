// The pod, namespace and container labels of each process in a sample,
// from the two sources of pod names this node has:
//   - the kubelet's pod-resources API (pod_resources.h): which container
//     each GPU was allocated to;
//   - the kubelet's log folders (pod_names.h): the names behind the pod UID
//     and container id in the process's cgroup path (pod_cgroup.h).
//
// Never a wrong pod: a process gets a pod only when its cgroup path has
// the kubelet's shape (so a host process, or one in a cgroup of unknown
// shape, never gets one), and a GPU's allocation names a process only when
// it cannot mean another pod:
//   - every GPU the process holds memory on was allocated to one and the
//     same container (not shared by time-slicing, not unallocated), and
//   - no process of another container (by pod UID and container id) holds
//     memory on those GPUs.
// When the log folders name the pod too, both must agree on namespace and
// pod, or the process gets no pod; the container then comes from the log
// folders (exact, by container id), else from the allocation.
// One case is left to the log folders: a pod that reaches a GPU without
// requesting it, alone on a GPU allocated to a pod with no process on it
// yet, would be named after that pod by the allocation alone; with the log
// folders (the DaemonSet mounts them) the two disagree and it gets none.
//
// Pure function of its inputs; thread-safe.
#pragma once

#include <map>
#include <vector>

#include "monitor/pod_names.h"
#include "monitor/pod_resources.h"
#include "monitor/sample.h"

namespace gpuleak::monitor {

// Labels by pid, only for processes given a pod.
using PodNamesByPid = std::map<int, PodNames>;

// `by_logs` may be null (no log folders); `allocations` is null when the
// pod-resources API was not read (no socket, not built in, no answer).
PodNamesByPid attribute_pods(const Sample& sample, const KubeletPodNames* by_logs,
                             const std::vector<GpuAllocation>* allocations);

}  // namespace gpuleak::monitor
