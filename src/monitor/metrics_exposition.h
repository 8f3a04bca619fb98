// The Prometheus metrics of the exporter: per-GPU and per-process gauges
// (GPU memory, host RSS, growth slope, leak flag, time until full) with
// labels gpu_uuid, pid, process_name and container_id, plus counts of
// doctor findings. Every metric is listed in docs/monitor.md.
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "monitor/doctor.h"

namespace gpuleak::monitor {

struct ExporterStats {
  std::uint64_t samples_total = 0;
  double last_sample_duration_s = 0;
  double interval_s = 0;
};

// `report` carries the sample (with trends) and the findings of the same moment.
std::string render_metrics(const DoctorReport& report, const ExporterStats& stats);

}  // namespace gpuleak::monitor
