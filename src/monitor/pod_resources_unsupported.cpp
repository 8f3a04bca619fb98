// pod_resources.h for a build without gRPC: the API is never asked.
#include "monitor/pod_resources.h"

namespace gpuleak::monitor {

bool pod_resources_built_in() { return false; }

PodResourcesAnswer list_gpu_allocations(const std::string&, std::chrono::milliseconds) {
  PodResourcesAnswer answer;
  answer.error =
      "this gpuleak was built without gRPC, so the kubelet's pod-resources API is not read";
  return answer;
}

}  // namespace gpuleak::monitor
