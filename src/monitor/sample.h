// What `top`, the exporter and `doctor` show for one moment: each GPU and
// each process that holds GPU memory or a GPU device file, with trends.
// Plain values, produced by SampleHistory, read by the renderers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/gpu_devices.h"
#include "monitor/host_memory.h"
#include "monitor/process_info.h"
#include "monitor/process_tree.h"
#include "monitor/sample_reader.h"
#include "monitor/trend_tracker.h"

namespace gpuleak::monitor {

struct DeviceView {
  GpuDevice device;
  std::uint64_t accounted_bytes = 0;    // sum over the processes the driver lists
  std::uint64_t unaccounted_bytes = 0;  // used minus accounted (never negative)
  TrendSummary used;                    // seconds_until_full: until the device is full
};

struct ProcessDeviceView {
  unsigned device_index = 0;
  std::string device_uuid;
  std::optional<std::uint64_t> memory_bytes;  // empty when the driver cannot tell
  TrendSummary trend;  // seconds_until_full: until this device is full at this rate
};

struct ProcessView {
  int pid = 0;
  // False for a pid the driver lists that does not exist in this /proc
  // (another PID namespace); then `info` holds only the pid.
  bool visible = true;
  ProcessInfo info;
  std::string user;
  Relation relation;
  OrphanAssessment orphan;
  std::vector<ProcessDeviceView> gpu;
  std::optional<std::uint64_t> gpu_memory_bytes;  // sum over devices, when any is known
  TrendSummary gpu_trend;  // of the sum; seconds_until_full: earliest device to fill
  TrendSummary rss_trend;  // host RSS; seconds_until_full: until MemAvailable is used up
  bool watched = false;    // named with --pid
};

struct Sample {
  std::size_t index = 0;  // 0 for the first sample
  std::int64_t unix_time_ms = 0;
  double elapsed_s = 0;  // since the first sample
  NvmlStatus nvml;
  std::string device_file_glob;
  std::vector<DeviceView> devices;
  std::vector<ProcessView> processes;  // most GPU memory first
  HostMemory host;
  std::vector<std::string> notes;  // partial problems, worded for people
};

}  // namespace gpuleak::monitor
