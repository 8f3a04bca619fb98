// Which container of which pod the kubelet allocated each GPU to, asked of
// the kubelet's pod-resources API (gRPC over a unix socket, normally
// /var/lib/kubelet/pod-resources/kubelet.sock; the messages are in
// pod_resources.proto). dcgm-exporter names pods the same way.
//
// The answer is per device: it says that a GPU was given to a container,
// not which processes use it. pod_attribution.h turns it into labels for
// processes, and only where that cannot name the wrong pod.
//
// Reading it needs gRPC, an optional build dependency (Debian's
// libgrpc++-dev and protobuf-compiler-grpc): a build without it answers
// every call with "not built in" and the exporter names pods from the
// kubelet's log folders only (pod_names.h).
//
// Thread-safe: each call opens its own connection and closes it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gpuleak::monitor {

// One GPU given to one container. The device id is the NVIDIA device
// plugin's: the GPU's UUID ("GPU-..."), without the "::<n>" suffix its
// time-slicing mode adds (several containers then share one GPU).
struct GpuAllocation {
  std::string device_uuid;
  std::string namespace_name;
  std::string pod;
  std::string container;
};

struct PodResourcesAnswer {
  bool answered = false;
  std::string error;  // why not, in a sentence, when !answered
  std::vector<GpuAllocation> gpus;
};

// The default socket path, as the kubelet makes it.
inline constexpr const char* kDefaultPodResourcesSocket =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

// True when this build can ask the API (it was built with gRPC).
bool pod_resources_built_in();

// Lists the GPUs (resources "nvidia.com/...", devices "GPU-...") allocated
// on this node. Returns within about `timeout` whatever the other end does:
// a socket that accepts and never answers gives answered == false.
PodResourcesAnswer list_gpu_allocations(const std::string& socket_path,
                                        std::chrono::milliseconds timeout);

}  // namespace gpuleak::monitor
