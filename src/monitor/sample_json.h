// The JSON form of a monitor sample: one object per sample for
// `gpuleak top --json`, and the device/process part of `gpuleak doctor --json`.
// Field meanings are listed in docs/monitor.md. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "monitor/sample.h"

namespace gpuleak::monitor {

struct SampleJsonOptions {
  bool include_trends = true;  // doctor looks once, so it has no trends to show
};

nlohmann::json sample_to_json(const Sample& sample, const SampleJsonOptions& options = {});
nlohmann::json device_to_json(const DeviceView& device, const SampleJsonOptions& options);
nlohmann::json process_to_json(const ProcessView& process, const SampleJsonOptions& options);

}  // namespace gpuleak::monitor
