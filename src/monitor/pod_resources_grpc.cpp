// pod_resources.h over gRPC, with the client code protoc generates from
// pod_resources.proto.
#include <grpcpp/grpcpp.h>

#include "monitor/pod_resources.h"
#include "pod_resources.grpc.pb.h"

namespace gpuleak::monitor {

namespace {

// The kubelet's answer grows with the pods on the node; gRPC's default
// limit (4 MiB) is far above what 110 pods give, but a node with many
// devices per container should not lose every name at once.
constexpr int kMaxAnswerBytes = 16 << 20;

// "GPU-<uuid>" or "GPU-<uuid>::<n>" (time-slicing): the UUID, or "" for
// ids that are not a whole GPU's (MIG slices, other vendors' ids).
std::string gpu_uuid_of_device_id(const std::string& id) {
  if (!id.starts_with("GPU-")) return {};
  return id.substr(0, id.find("::"));
}

}  // namespace

bool pod_resources_built_in() { return true; }

PodResourcesAnswer list_gpu_allocations(const std::string& socket_path,
                                        std::chrono::milliseconds timeout) {
  PodResourcesAnswer answer;
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxAnswerBytes);
  // A fresh channel per call: a kubelet that restarted, or a socket that
  // hung the last call, never leaves a stuck connection behind.
  auto channel = grpc::CreateCustomChannel("unix:" + socket_path,
                                           grpc::InsecureChannelCredentials(), arguments);
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  // The deadline covers connecting too: the call waits for the connection
  // only until then.
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesResponse response;
  grpc::Status status = stub->List(&context, v1::ListPodResourcesRequest(), &response);
  if (!status.ok()) {
    answer.error = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                       ? "the kubelet's pod-resources socket " + socket_path +
                             " gave no answer within " + std::to_string(timeout.count()) + " ms"
                       : "the kubelet's pod-resources socket " + socket_path +
                             " could not be read: " + status.error_message();
    return answer;
  }
  answer.answered = true;
  for (const auto& pod : response.pod_resources()) {
    for (const auto& container : pod.containers()) {
      for (const auto& devices : container.devices()) {
        if (!devices.resource_name().starts_with("nvidia.com/")) continue;
        for (const auto& id : devices.device_ids()) {
          std::string uuid = gpu_uuid_of_device_id(id);
          if (uuid.empty()) continue;
          answer.gpus.push_back({uuid, pod.namespace_(), pod.name(), container.name()});
        }
      }
    }
  }
  return answer;
}

}  // namespace gpuleak::monitor
