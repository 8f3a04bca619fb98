// `gpuleak exporter`: samples on its own schedule and serves the latest
// metrics at /metrics over HTTP (monitor/http_endpoint.h: one thread, bounded
// per client, so slow clients cannot stall a scrape), in the Prometheus text
// format.
//
// Trends come from the exporter's own sampling (every interval_s), not from
// scrapes, so the leak flag does not depend on how often Prometheus asks.
// A scrape never triggers a sample: it returns the text rendered after the
// last one, so a slow /proc never slows a scrape.
//
// Threads: run() serves on the calling thread and samples on one extra
// thread; stop() may be called from any thread, and makes run() return. The
// rendered text is shared under a mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "monitor/device_files.h"
#include "monitor/http_endpoint.h"
#include "monitor/metrics_exposition.h"
#include "monitor/pod_resources.h"
#include "monitor/trend_tracker.h"

namespace gpuleak::monitor {

// The exporter's default port: outside 9100-9999 (the Prometheus project's
// exporter range, fully allocated; 9835 is nvidia_gpu_exporter's), outside
// the ports Kubernetes components use (10248-10260) and the ephemeral range,
// and not in /etc/services. docs/monitor.md says how it was chosen.
inline constexpr int kDefaultExporterPort = 10417;

struct ExporterOptions {
  std::string host = "127.0.0.1";
  int port = kDefaultExporterPort;
  double interval_s = 5.0;
  TrendTracker::Options trend;
  std::string device_file_glob;  // empty: environment or /dev/nvidia*
  bool use_nvml = true;
  ExporterIdentity identity;  // Hostname label, gpuleak_build_info
  // The kubelet's log root (pods/, containers/) that names pods; empty: none.
  std::string kubelet_log_root = "/var/log";
  // The kubelet's pod-resources socket (pod_resources.h), asked while some
  // process runs in a pod and the socket exists; empty: never asked.
  std::string pod_resources_socket = kDefaultPodResourcesSocket;
  // How long one question to that socket may take. It is asked from the
  // sampling thread, never from a scrape, so a kubelet that hangs delays
  // one sample by this much and then is left alone for a while.
  double pod_resources_timeout_s = 1.0;
};

class ExporterServer {
 public:
  explicit ExporterServer(ExporterOptions options);
  ~ExporterServer();
  ExporterServer(const ExporterServer&) = delete;
  ExporterServer& operator=(const ExporterServer&) = delete;

  // Takes the first sample and binds the socket. Returns the bound port (the
  // real one when options.port is 0); throws std::runtime_error with a
  // sentence for people when the address cannot be bound.
  int start();
  // Serves until stop(). Requires start().
  void run();
  // Makes run() return; safe from any thread, and more than once.
  void stop();

  // The NVML message of the first sample (empty when NVML is available).
  const std::string& nvml_note() const { return nvml_note_; }

 private:
  void sample_loop();
  void sample_once();

  ExporterOptions options_;
  std::unique_ptr<HttpEndpoint> http_;
  struct State;
  std::unique_ptr<State> state_;
  std::thread sampling_thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;                            // guarded by mutex_
  std::shared_ptr<const std::string> metrics_text_;  // guarded by mutex_
  std::string nvml_note_;
};

}  // namespace gpuleak::monitor
