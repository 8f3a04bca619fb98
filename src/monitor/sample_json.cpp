#include "monitor/sample_json.h"

#include <algorithm>

namespace gpuleak::monitor {

namespace {

using nlohmann::json;

json optional_number(const std::optional<std::uint64_t>& value) {
  return value ? json(*value) : json(nullptr);
}

json optional_seconds(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

const char* handle_scan_name(HandleScan scan) {
  switch (scan) {
    case HandleScan::kNotScanned:
      return "not_scanned";
    case HandleScan::kScanned:
      return "scanned";
    case HandleScan::kDenied:
      return "denied";
    case HandleScan::kGone:
      return "gone";
  }
  return "not_scanned";
}

void add_trend(json& object, const char* prefix, const TrendSummary& trend,
               const char* until_full_name) {
  object[std::string(prefix) + "growth_bytes_per_s"] = trend.slope_bytes_per_s;
  object[std::string(prefix) + "leak"] = trend.leak;
  object[until_full_name] = optional_seconds(trend.seconds_until_full);
}

}  // namespace

json device_to_json(const DeviceView& view, const SampleJsonOptions& options) {
  const GpuDevice& d = view.device;
  json device = {
      {"index", d.index},
      {"uuid", d.uuid},
      {"name", d.name},
      {"memory_total_bytes", d.memory_total_bytes},
      {"memory_used_bytes", d.memory_used_bytes},
      {"memory_reserved_bytes",
       d.reserved_reported ? json(d.memory_reserved_bytes) : json(nullptr)},
      {"accounted_bytes", view.accounted_bytes},
      {"unaccounted_bytes", view.unaccounted_bytes},
      {"process_count", d.processes.size()},
  };
  if (options.include_trends) {
    add_trend(device, "", view.used, "seconds_until_full");
    device["trend_points"] = view.used.points;
  }
  return device;
}

json process_to_json(const ProcessView& view, const SampleJsonOptions& options) {
  const ProcessInfo& info = view.info;
  json process = {
      {"pid", view.pid},
      {"visible", view.visible},
  };
  if (view.visible) {
    process["ppid"] = info.ppid;
    process["name"] = info.comm;
    process["command"] = info.command_line();
    process["user"] = view.user;
    process["uid"] = info.uid ? json(*info.uid) : json(nullptr);
    process["state"] = std::string(1, info.state);
    process["container_id"] = info.container_id.empty() ? json(nullptr) : json(info.container_id);
    process["relation"] = {
        {"kind", relation_kind_name(view.relation.kind)},
        {"of_pid", view.relation.of_pid > 0 ? json(view.relation.of_pid) : json(nullptr)},
        {"text", view.relation.text},
    };
    process["orphan"] = view.orphan.orphaned;
    process["orphan_evidence"] = view.orphan.evidence;
    process["device_files"] = info.device_files;
    process["device_handles"] = info.device_handle_count;
    process["handle_scan"] = handle_scan_name(info.handle_scan);
    process["host_rss_bytes"] = info.rss_bytes;
  }
  json gpu = json::array();
  for (const auto& use : view.gpu) {
    json entry = {
        {"device_index", use.device_index},
        {"device_uuid", use.device_uuid},
        {"memory_bytes", optional_number(use.memory_bytes)},
    };
    if (options.include_trends) add_trend(entry, "", use.trend, "seconds_until_full");
    gpu.push_back(std::move(entry));
  }
  process["gpu"] = std::move(gpu);
  process["gpu_memory_bytes"] = optional_number(view.gpu_memory_bytes);
  if (options.include_trends) {
    add_trend(process, "gpu_", view.gpu_trend, "seconds_until_device_full");
    if (view.visible) add_trend(process, "host_rss_", view.rss_trend, "seconds_until_host_full");
    process["trend_points"] = std::max(view.gpu_trend.points, view.rss_trend.points);
  }
  process["watched"] = view.watched;
  return process;
}

json sample_to_json(const Sample& sample, const SampleJsonOptions& options) {
  json devices = json::array();
  for (const auto& device : sample.devices) devices.push_back(device_to_json(device, options));
  json processes = json::array();
  for (const auto& process : sample.processes) {
    processes.push_back(process_to_json(process, options));
  }
  json out = {
      {"sample", sample.index},
      {"time_unix_ms", sample.unix_time_ms},
      {"elapsed_s", sample.elapsed_s},
      {"nvml",
       {{"available", sample.nvml.available},
        {"message", sample.nvml.message.empty() ? json(nullptr) : json(sample.nvml.message)},
        {"driver_version",
         sample.nvml.driver_version.empty() ? json(nullptr) : json(sample.nvml.driver_version)}}},
      {"device_file_glob", sample.device_file_glob},
      {"host",
       {{"memory_total_bytes", sample.host.known ? json(sample.host.total_bytes) : json(nullptr)},
        {"memory_available_bytes",
         sample.host.known ? json(sample.host.available_bytes) : json(nullptr)}}},
      {"devices", std::move(devices)},
      {"processes", std::move(processes)},
      {"notes", sample.notes},
  };
  return out;
}

}  // namespace gpuleak::monitor
