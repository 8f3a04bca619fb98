#include "monitor/exporter_server.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>

#include "monitor/doctor.h"
#include "monitor/metrics_exposition.h"
#include "monitor/pod_attribution.h"
#include "monitor/pod_names.h"
#include "monitor/pod_resources_schedule.h"
#include "monitor/sample_history.h"
#include "monitor/sample_reader.h"
#include "quantity/prometheus.h"

namespace gpuleak::monitor {

namespace {

constexpr const char* kIndexPage =
    "<html><head><title>gpuleak exporter</title></head><body>"
    "<h1>gpuleak exporter</h1><p><a href=\"/metrics\">/metrics</a>: GPU and per-process "
    "memory, growth and leak flags in the Prometheus text format.</p></body></html>\n";

}  // namespace

// The sampling side: only the sampling thread touches it.
struct ExporterServer::State {
  explicit State(const ExporterOptions& options)
      : source(DeviceFilePattern::from_flag_or_environment(options.device_file_glob),
               options.use_nvml),
        history(SampleHistory::Options{options.trend, {}}),
        pods(options.kubelet_log_root),
        pod_resources(options.pod_resources_socket, options.pod_resources_timeout_s) {}
  SampleReader source;
  SampleHistory history;
  KubeletPodNames pods;
  PodResourcesSchedule pod_resources;
  ExporterStats stats;
};

ExporterServer::ExporterServer(ExporterOptions options)
    : options_(std::move(options)), state_(std::make_unique<State>(options_)) {
  state_->stats.interval_s = options_.interval_s;
  auto index = std::make_shared<const std::string>(kIndexPage);
  http_ = std::make_unique<HttpEndpoint>(
      [this, index](const std::string& path) -> std::optional<HttpEndpoint::Response> {
        if (path == "/metrics") {
          std::lock_guard<std::mutex> lock(mutex_);
          return HttpEndpoint::Response{200, quantity::kPrometheusContentType, metrics_text_};
        }
        if (path == "/") return HttpEndpoint::Response{200, "text/html; charset=utf-8", index};
        return std::nullopt;
      });
}

ExporterServer::~ExporterServer() {
  stop();
  if (sampling_thread_.joinable()) sampling_thread_.join();
}

void ExporterServer::sample_once() {
  auto started = std::chrono::steady_clock::now();
  RawSample raw = state_->source.take_periodic();
  Sample sample = state_->history.add(raw);
  DoctorReport report = diagnose(raw, std::move(sample));
  // Pod names are read only when some process is in a pod (two directory
  // listings and at most one question to the kubelet), so a node without
  // Kubernetes pays nothing.
  bool any_pod = false;
  for (const auto& process : report.sample.processes)
    any_pod = any_pod || !process.info.pod_uid.empty();
  PodNamesByPid pod_names;
  if (any_pod) {
    state_->pods.refresh();
    pod_names = attribute_pods(report.sample, &state_->pods, state_->pod_resources.poll());
  }
  state_->stats.samples_total += 1;
  state_->stats.last_sample_duration_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto text = std::make_shared<const std::string>(
      render_metrics(report, state_->stats, options_.identity, &pod_names));
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_text_ = std::move(text);
}

int ExporterServer::start() {
  sample_once();
  nvml_note_ = state_->source.nvml_status().message;
  int port = http_->listen(options_.host, options_.port);  // throws with a sentence
  sampling_thread_ = std::thread([this] { sample_loop(); });
  return port;
}

void ExporterServer::run() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
  }
  http_->run();
}

void ExporterServer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  http_->stop();
}

void ExporterServer::sample_loop() {
  auto next = std::chrono::steady_clock::now();
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.interval_s));
  for (;;) {
    next += interval;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_until(lock, next, [this] { return stopping_; })) break;
    }
    // A sample that overran its slot does not make the next ones bunch up.
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now();
    try {
      sample_once();
    } catch (const std::exception& error) {
      // Keep serving the last good metrics; a transient /proc or driver
      // failure must not take the endpoint down.
      fmt::print(stderr, "gpuleak exporter: sample failed: {}\n", error.what());
    }
  }
}

}  // namespace gpuleak::monitor
