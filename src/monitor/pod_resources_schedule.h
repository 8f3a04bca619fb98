// When the exporter asks the kubelet's pod-resources API (pod_resources.h),
// and what it said last: only where the socket exists, at most once per
// sample, and after a question that got no answer not again for a minute,
// so a hung kubelet costs one slow sample a minute, not every sample. Says
// on stderr, once each, when asking fails, when it works again, and when
// this build cannot ask at all.
//
// Not thread-safe: the sampling thread owns it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "monitor/pod_resources.h"

namespace gpuleak::monitor {

class PodResourcesSchedule {
 public:
  // `socket_path` empty: never ask.
  PodResourcesSchedule(std::string socket_path, double timeout_s);

  // The GPUs allocated on this node, or null when the API was not read now
  // (no socket, not built in, no answer, or waiting after a failure).
  const std::vector<GpuAllocation>* poll();

 private:
  std::string socket_path_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point next_try_{};
  std::string failing_;  // the last error, while asking fails
  bool said_not_built_in_ = false;
  std::vector<GpuAllocation> gpus_;
};

}  // namespace gpuleak::monitor
