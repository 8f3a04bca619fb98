#include "monitor/exporter_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "monitor/doctor.h"
#include "monitor/metrics_exposition.h"
#include "monitor/sampler.h"
#include "monitor/snapshot.h"
#include "report/prometheus.h"

namespace gpuleak::monitor {

namespace {

// Prometheus scrapes one target over one kept-alive connection; a few
// workers cover a second scraper and a person with curl.
constexpr std::size_t kHttpWorkerThreads = 4;

constexpr const char* kIndexPage =
    "<html><head><title>gpuleak exporter</title></head><body>"
    "<h1>gpuleak exporter</h1><p><a href=\"/metrics\">/metrics</a>: GPU and per-process "
    "memory, growth and leak flags in the Prometheus text format.</p></body></html>\n";

}  // namespace

// The sampling side: only the sampler thread touches it.
struct ExporterServer::State {
  explicit State(const ExporterOptions& options)
      : source(DeviceFilePattern::from_flag_or_environment(options.device_file_glob),
               options.use_nvml),
        sampler(Sampler::Options{options.trend, {}}) {}
  SnapshotSource source;
  Sampler sampler;
  ExporterStats stats;
};

ExporterServer::ExporterServer(ExporterOptions options)
    : options_(std::move(options)),
      server_(std::make_unique<httplib::Server>()),
      state_(std::make_unique<State>(options_)) {
  state_->stats.interval_s = options_.interval_s;
  server_->new_task_queue = [] { return new httplib::ThreadPool(kHttpWorkerThreads); };
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    std::string body;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body = metrics_text_;
    }
    response.set_content(body, report::kPrometheusContentType);
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(kIndexPage, "text/html; charset=utf-8");
  });
}

ExporterServer::~ExporterServer() {
  stop();
  if (sampler_thread_.joinable()) sampler_thread_.join();
}

void ExporterServer::sample_once() {
  auto started = std::chrono::steady_clock::now();
  Snapshot snapshot = state_->source.take_periodic();
  MonitorSample sample = state_->sampler.add(snapshot);
  DoctorReport report = diagnose(snapshot, std::move(sample));
  state_->stats.samples_total += 1;
  state_->stats.last_sample_duration_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string text = render_metrics(report, state_->stats);
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_text_ = std::move(text);
}

int ExporterServer::start() {
  sample_once();
  nvml_note_ = state_->source.nvml_status().message;
  int port = options_.port;
  errno = 0;
  if (options_.port == 0) {
    port = server_->bind_to_any_port(options_.host);
    if (port < 0) port = -1;
  } else if (!server_->bind_to_port(options_.host, options_.port)) {
    port = -1;
  }
  if (port <= 0) {
    int error = errno;
    throw std::runtime_error(fmt::format(
        "cannot listen on {}:{}{}: is another exporter running there, or is the address not "
        "one of this machine's?",
        options_.host, options_.port, error ? fmt::format(" ({})", std::strerror(error)) : ""));
  }
  sampler_thread_ = std::thread([this] { sample_loop(); });
  return port;
}

void ExporterServer::run() {
  serving_ = true;
  bool stop_requested;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested = stopping_;
  }
  if (!stop_requested) server_->listen_after_bind();
  serving_ = false;
}

void ExporterServer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  server_->stop();
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
  // The HTTP library ignores stop() until its accept loop runs; a stop that
  // came just before run() reached it is repeated until run() returns.
  while (serving_) {
    server_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace gpuleak::monitor
