// The Kubernetes pod a process belongs to, read from its cgroup path.
//
// The kubelet puts every container of a pod under one cgroup named after
// the pod's UID, in one of two shapes (its cgroup driver decides which):
//   systemd:  /kubepods.slice/kubepods-burstable.slice/
//             kubepods-burstable-pod<uid, '-' written '_'>.slice/cri-containerd-<id>.scope
//   cgroupfs: /kubepods/burstable/pod<uid>/<container id>
// (Guaranteed pods have no QoS level in between; kind and other nested
// setups prefix "kubelet-" and may sit below another container's cgroup.)
// Only these shapes count: a path of any other shape gives no pod, so a
// label is never guessed. The UID names the pod; its name, namespace and
// container names come from pod_names.h.
//
// Pure function; thread-safe.
#pragma once

#include <string>

namespace gpuleak::monitor {

// The pod UID ("0b6c2c8e-5f1d-4c57-9d8e-1a2b3c4d5e6f", lowercase, with
// dashes) named by the content of /proc/PID/cgroup, or "" when the process
// is not in a pod cgroup of a shape the kubelet makes.
std::string pod_uid_from_cgroup(const std::string& cgroup_file_text);

}  // namespace gpuleak::monitor
