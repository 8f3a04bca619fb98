#include "monitor/pod_resources_schedule.h"

#include <fmt/format.h>
#include <sys/stat.h>

namespace gpuleak::monitor {

namespace {

// After a question the kubelet did not answer, the next one waits this long.
constexpr auto kRetryAfter = std::chrono::seconds(60);

bool is_socket(const std::string& path) {
  struct stat status {};
  return !path.empty() && stat(path.c_str(), &status) == 0 && S_ISSOCK(status.st_mode);
}

}  // namespace

PodResourcesSchedule::PodResourcesSchedule(std::string socket_path, double timeout_s)
    : socket_path_(std::move(socket_path)),
      timeout_(std::chrono::milliseconds(static_cast<long>(timeout_s * 1000))) {}

const std::vector<GpuAllocation>* PodResourcesSchedule::poll() {
  if (!is_socket(socket_path_)) return nullptr;
  if (!pod_resources_built_in()) {
    if (!said_not_built_in_)
      fmt::print(stderr,
                 "gpuleak exporter: {}; pods are named from the kubelet's log folders only\n",
                 list_gpu_allocations(socket_path_, timeout_).error);
    said_not_built_in_ = true;
    return nullptr;
  }
  auto now = std::chrono::steady_clock::now();
  if (now < next_try_) return nullptr;
  PodResourcesAnswer answer = list_gpu_allocations(socket_path_, timeout_);
  if (!answer.answered) {
    if (failing_ != answer.error)
      fmt::print(stderr,
                 "gpuleak exporter: {}; pods are named from the kubelet's log folders only, "
                 "asking again in {} s\n",
                 answer.error, kRetryAfter.count());
    failing_ = answer.error;
    next_try_ = now + kRetryAfter;
    return nullptr;
  }
  if (!failing_.empty())
    fmt::print(stderr, "gpuleak exporter: the kubelet's pod-resources socket answers again\n");
  failing_.clear();
  gpus_ = std::move(answer.gpus);
  return &gpus_;
}

}  // namespace gpuleak::monitor
