// The container a process runs in, read from its cgroup path.
//
// Container runtimes name a container's cgroup after its 64-hex-digit id:
//   0::/system.slice/docker-<id>.scope              (Docker, systemd driver)
//   12:memory:/docker/<id>                          (Docker, cgroupfs driver, v1)
//   0::/kubepods.slice/.../cri-containerd-<id>.scope (Kubernetes + containerd)
//   0::/kubepods/burstable/pod<uid>/<id>            (Kubernetes, cgroupfs)
//   0::/machine.slice/libpod-<id>.scope             (Podman)
//   0::/.../crio-<id>.scope                         (CRI-O)
// Inside a container with its own cgroup namespace the path is just "/", so
// no id is found there; that is expected, not an error.
//
// Pure function; thread-safe.
#pragma once

#include <string>

namespace gpuleak::monitor {

// The id (64 lowercase hex digits) of the innermost container named in the
// content of /proc/PID/cgroup, or "" when the process runs on the host.
std::string container_id_from_cgroup(const std::string& cgroup_file_text);

// The short form people type (docker ps shows 12 digits).
std::string short_container_id(const std::string& container_id);

}  // namespace gpuleak::monitor
