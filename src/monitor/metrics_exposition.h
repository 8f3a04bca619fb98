// The Prometheus metrics of the exporter: per-GPU and per-process gauges
// (GPU memory, host RSS, growth slope, leak flag, time until full), counts
// of doctor findings and the build. Every metric is listed in
// docs/monitor.md.
//
// Labels join dcgm-exporter's: a GPU is `gpu` (NVML index), `UUID` (as NVML
// gives it, "GPU-..."), `device` ("nvidia<minor>"), `modelName`; the node is
// `Hostname` on every series; a process carries `pid`, `process_name`,
// `container_id`, and `pod`, `namespace`, `container` when it runs in a
// Kubernetes pod (pod_attribution.h). The label set of
// each family is fixed, and a process's series exist only while it is in the
// sample, so series stay bounded.
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "monitor/doctor.h"
#include "monitor/pod_attribution.h"

namespace gpuleak::monitor {

struct ExporterStats {
  std::uint64_t samples_total = 0;
  double last_sample_duration_s = 0;
  double interval_s = 0;
};

// Who serves the metrics: constant for the exporter's life.
struct ExporterIdentity {
  std::string hostname;  // the node's name (Kubernetes: spec.nodeName)
  std::string version;
  std::string revision;  // the source's git revision, or "unknown"
};

// `report` carries the sample (with trends) and the findings of the same
// moment; `pods` (may be null) names the pods of processes, by pid.
std::string render_metrics(const DoctorReport& report, const ExporterStats& stats,
                           const ExporterIdentity& identity, const PodNamesByPid* pods);

}  // namespace gpuleak::monitor
