#include "monitor/metrics_exposition.h"

#include <limits>
#include <map>
#include <optional>

#include "quantity/prometheus.h"

namespace gpuleak::monitor {

namespace {

using quantity::ExpositionWriter;
using quantity::MetricLabels;
using quantity::MetricType;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

double until_full(const TrendSummary& trend) {
  return trend.leak ? trend.seconds_until_full.value_or(kInfinity) : kInfinity;
}

// The labels of one moment's series: the node, each GPU's identity, each
// process's identity.
class SeriesLabels {
 public:
  SeriesLabels(const DoctorReport& report, const ExporterIdentity& identity,
               const PodNamesByPid* pods)
      : hostname_(identity.hostname), pods_(pods) {
    for (const auto& view : report.sample.devices) gpus_[view.device.uuid] = view.device;
  }

  MetricLabels node() const { return {{"Hostname", hostname_}}; }

  MetricLabels gpu(const GpuDevice& device) const {
    unsigned minor = device.minor_number.value_or(device.index);
    return {{"gpu", std::to_string(device.index)},
            {"UUID", device.uuid},
            {"device", "nvidia" + std::to_string(minor)},
            {"modelName", device.name},
            {"Hostname", hostname_}};
  }

  MetricLabels process(const ProcessView& view) const {
    const PodNames* names = nullptr;
    if (pods_ && view.visible) {
      auto found = pods_->find(view.pid);
      if (found != pods_->end()) names = &found->second;
    }
    return {{"pid", std::to_string(view.pid)},
            {"process_name", view.visible ? view.info.comm : std::string()},
            {"container_id", view.info.container_id},
            {"pod", names ? names->pod : std::string()},
            {"namespace", names ? names->namespace_name : std::string()},
            {"container", names ? names->container : std::string()},
            {"Hostname", hostname_}};
  }

  MetricLabels process_on_gpu(const ProcessView& view, const ProcessDeviceView& use) const {
    MetricLabels labels = process(view);
    labels.pop_back();  // Hostname comes with the GPU's labels
    auto gpu_it = gpus_.find(use.device_uuid);
    GpuDevice device;
    if (gpu_it != gpus_.end()) {
      device = gpu_it->second;
    } else {
      device.index = use.device_index;
      device.uuid = use.device_uuid;
    }
    MetricLabels gpu_labels = gpu(device);
    labels.insert(labels.end(), gpu_labels.begin(), gpu_labels.end());
    return labels;
  }

 private:
  std::string hostname_;
  const PodNamesByPid* pods_;
  std::map<std::string, GpuDevice> gpus_;
};

// Writes one per-device family.
template <typename ValueOf>
void device_family(ExpositionWriter& out, const DoctorReport& report, const SeriesLabels& labels,
                   const char* name, const char* help, ValueOf value_of) {
  out.family(name, help, MetricType::kGauge);
  for (const auto& device : report.sample.devices)
    out.sample(labels.gpu(device.device), value_of(device));
}

// Writes one per-process-per-GPU family; skips uses whose amount is unknown.
template <typename ValueOf>
void process_gpu_family(ExpositionWriter& out, const DoctorReport& report,
                        const SeriesLabels& labels, const char* name, const char* help,
                        ValueOf value_of) {
  out.family(name, help, MetricType::kGauge);
  for (const auto& process : report.sample.processes) {
    for (const auto& use : process.gpu) {
      if (use.memory_bytes) out.sample(labels.process_on_gpu(process, use), value_of(use));
    }
  }
}

// Writes one per-process host family; only processes visible here.
template <typename ValueOf>
void process_host_family(ExpositionWriter& out, const DoctorReport& report,
                         const SeriesLabels& labels, const char* name, const char* help,
                         ValueOf value_of) {
  out.family(name, help, MetricType::kGauge);
  for (const auto& process : report.sample.processes) {
    if (process.visible) out.sample(labels.process(process), value_of(process));
  }
}

}  // namespace

std::string render_metrics(const DoctorReport& report, const ExporterStats& stats,
                           const ExporterIdentity& identity, const PodNamesByPid* pods) {
  ExpositionWriter out;
  const Sample& sample = report.sample;
  const SeriesLabels labels(report, identity, pods);

  out.family("gpuleak_build_info",
             "Always 1; the version and source revision of the gpuleak that serves these metrics.",
             MetricType::kGauge);
  MetricLabels build = {{"version", identity.version}, {"revision", identity.revision}};
  build.push_back(labels.node().front());
  out.sample(build, 1);

  out.family("gpuleak_nvml_up", "1 when NVML (the NVIDIA driver) answered, 0 otherwise.",
             MetricType::kGauge);
  out.sample(labels.node(), sample.nvml.available ? 1 : 0);

  device_family(out, report, labels, "gpuleak_gpu_memory_total_bytes", "Total memory of the GPU.",
                [](const DeviceView& d) { return double(d.device.memory_total_bytes); });
  device_family(out, report, labels, "gpuleak_gpu_memory_used_bytes", "Memory in use on the GPU.",
                [](const DeviceView& d) { return double(d.device.memory_used_bytes); });
  device_family(out, report, labels, "gpuleak_gpu_memory_unaccounted_bytes",
                "Used GPU memory that no process listed by the driver accounts for.",
                [](const DeviceView& d) { return double(d.unaccounted_bytes); });
  device_family(out, report, labels, "gpuleak_gpu_memory_growth_bytes_per_second",
                "Robust (Theil-Sen) slope of the GPU's used memory over the trend window.",
                [](const DeviceView& d) { return d.used.slope_bytes_per_s; });
  device_family(out, report, labels, "gpuleak_gpu_memory_leak",
                "1 when the GPU's used memory keeps growing (Mann-Kendall test, sustained).",
                [](const DeviceView& d) { return d.used.leak ? 1.0 : 0.0; });
  device_family(out, report, labels, "gpuleak_gpu_seconds_until_full",
                "Seconds until the GPU is full at the current growth; +Inf when not leaking.",
                [](const DeviceView& d) { return until_full(d.used); });

  process_gpu_family(out, report, labels, "gpuleak_process_gpu_memory_bytes",
                     "GPU memory the driver counts against the process on this GPU.",
                     [](const ProcessDeviceView& u) { return double(*u.memory_bytes); });
  process_gpu_family(out, report, labels, "gpuleak_process_gpu_memory_growth_bytes_per_second",
                     "Robust slope of the process's GPU memory on this GPU.",
                     [](const ProcessDeviceView& u) { return u.trend.slope_bytes_per_s; });
  process_gpu_family(out, report, labels, "gpuleak_process_gpu_memory_leak",
                     "1 when the process's GPU memory on this GPU keeps growing.",
                     [](const ProcessDeviceView& u) { return u.trend.leak ? 1.0 : 0.0; });
  process_gpu_family(out, report, labels, "gpuleak_process_gpu_seconds_until_full",
                     "Seconds until this GPU is full at the process's growth; +Inf when not "
                     "leaking.",
                     [](const ProcessDeviceView& u) { return until_full(u.trend); });

  process_host_family(out, report, labels, "gpuleak_process_host_rss_bytes",
                      "Resident host memory (RSS) of a process that uses a GPU.",
                      [](const ProcessView& p) { return double(p.info.rss_bytes); });
  process_host_family(out, report, labels, "gpuleak_process_host_rss_growth_bytes_per_second",
                      "Robust slope of the process's host RSS.",
                      [](const ProcessView& p) { return p.rss_trend.slope_bytes_per_s; });
  process_host_family(out, report, labels, "gpuleak_process_host_rss_leak",
                      "1 when the process's host RSS keeps growing.",
                      [](const ProcessView& p) { return p.rss_trend.leak ? 1.0 : 0.0; });
  process_host_family(out, report, labels, "gpuleak_process_host_seconds_until_full",
                      "Seconds until host MemAvailable is used up at the process's RSS growth; "
                      "+Inf when not leaking.",
                      [](const ProcessView& p) { return until_full(p.rss_trend); });
  process_host_family(out, report, labels, "gpuleak_process_gpu_device_handles",
                      "Open file handles of the process to GPU device files (/dev/nvidia*).",
                      [](const ProcessView& p) { return double(p.info.device_handle_count); });

  out.family("gpuleak_process_info",
             "Always 1; labels say who the process is and what doctor thinks of it.",
             MetricType::kGauge);
  for (std::size_t i = 0; i < sample.processes.size(); ++i) {
    const ProcessView& p = sample.processes[i];
    MetricLabels info = labels.process(p);
    info.push_back({"user", p.user});
    info.push_back({"parent_pid", p.visible ? std::to_string(p.info.ppid) : std::string()});
    info.push_back({"relation", relation_kind_name(p.relation.kind)});
    info.push_back({"verdict", i < report.verdicts.size() ? report.verdicts[i] : "ok"});
    out.sample(info, 1);
  }

  std::map<std::string, int> findings_by_kind;
  for (auto kind : {FindingKind::kOrphan, FindingKind::kZombie, FindingKind::kWorkerContext,
                    FindingKind::kOtherNamespace, FindingKind::kUnaccountedMemory,
                    FindingKind::kGrowingMemory}) {
    findings_by_kind[finding_kind_name(kind)] = 0;
  }
  for (const auto& finding : report.findings) ++findings_by_kind[finding_kind_name(finding.kind)];
  out.family("gpuleak_doctor_findings",
             "Number of doctor findings of each kind (orphan, zombie, worker_context, "
             "other_namespace, unaccounted_memory, growing_memory).",
             MetricType::kGauge);
  for (const auto& [kind, count] : findings_by_kind) {
    MetricLabels finding = {{"kind", kind}};
    finding.push_back(labels.node().front());
    out.sample(finding, count);
  }

  out.family("gpuleak_exporter_samples_total", "Samples the exporter has taken.",
             MetricType::kCounter);
  out.sample(labels.node(), static_cast<double>(stats.samples_total));
  out.family("gpuleak_exporter_sample_duration_seconds", "How long the last sample took.",
             MetricType::kGauge);
  out.sample(labels.node(), stats.last_sample_duration_s);
  out.family("gpuleak_exporter_sample_interval_seconds", "Time between samples.",
             MetricType::kGauge);
  out.sample(labels.node(), stats.interval_s);
  return out.take();
}

}  // namespace gpuleak::monitor
