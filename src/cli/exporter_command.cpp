// `gpuleak exporter`: serves per-GPU and per-process memory metrics with
// growth slopes and leak flags to Prometheus, on loopback unless told otherwise.
#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "command.h"
#include "monitor/device_files.h"
#include "monitor/exporter_server.h"
#include "version.h"

namespace gpuleak::cli {

namespace {

#ifndef GPULEAK_REVISION
#define GPULEAK_REVISION "unknown"
#endif

const std::string kDefaultListen = "127.0.0.1:" + std::to_string(monitor::kDefaultExporterPort);

struct ExporterFlags {
  std::string listen = kDefaultListen;
  std::string hostname;  // empty: $NODE_NAME, else gethostname()
  std::string kubelet_log_root = "/var/log";
  std::string pod_resources_socket = monitor::kDefaultPodResourcesSocket;
  double interval_s = 5.0;
  double window_s = 600;
  std::uint64_t min_growth_bytes_per_s = std::uint64_t{16} * 1024;
  bool no_nvml = false;
  std::string device_files;
};

struct ListenAddress {
  std::string host;
  int port = 0;
};

// "127.0.0.1:10417", "[::1]:10417", "localhost:10417", "0.0.0.0:10417".
ListenAddress parse_listen(const std::string& text) {
  ListenAddress address;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw UsageError(fmt::format("--listen '{}': write an IPv6 address as [::1]:10417", text));
    }
    address.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    std::size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      throw UsageError(
          fmt::format("--listen '{}': expected HOST:PORT, e.g. 127.0.0.1:10417", text));
    }
    address.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  std::size_t used = 0;
  int port = -1;
  try {
    port = std::stoi(port_text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port_text.size() || port < 0 || port > 65535) {
    throw UsageError(fmt::format("--listen '{}': the port must be a number from 0 to 65535", text));
  }
  address.port = port;
  return address;
}

// The node's name for the Hostname label. In a pod, gethostname() is the
// pod's name, so the DaemonSet passes the node's name in $NODE_NAME (from
// spec.nodeName), as dcgm-exporter's deployments do.
std::string node_hostname(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* from_environment = std::getenv("NODE_NAME");
  if (from_environment && *from_environment) return from_environment;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

int run_exporter(const ExporterFlags& flags) {
  ListenAddress address = parse_listen(flags.listen);
  monitor::ExporterOptions options;
  options.host = address.host;
  options.port = address.port;
  options.interval_s = flags.interval_s;
  options.trend.window_s = flags.window_s;
  options.trend.min_growth_bytes_per_s = static_cast<double>(flags.min_growth_bytes_per_s);
  options.device_file_glob = flags.device_files;
  options.use_nvml = !flags.no_nvml;
  options.identity = {node_hostname(flags.hostname), kVersion, GPULEAK_REVISION};
  options.kubelet_log_root = flags.kubelet_log_root;
  options.pod_resources_socket = flags.pod_resources_socket;

  // Block the stop signals before any thread starts, so every thread
  // inherits the mask and only the waiter below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a scraper that hangs up must not end the exporter

  monitor::DeviceFilePattern pattern =
      monitor::DeviceFilePattern::from_flag_or_environment(flags.device_files);
  if (std::string notice = pattern.change_notice(); !notice.empty())
    std::fprintf(stderr, "gpuleak exporter: %s\n", notice.c_str());
  monitor::ExporterServer server(options);
  int port = 0;
  try {
    port = server.start();
  } catch (const std::runtime_error& error) {
    throw InputError(error.what());
  }
  if (!server.nvml_note().empty()) {
    std::fprintf(stderr, "gpuleak exporter: %s\n", server.nvml_note().c_str());
  }
  if (!is_loopback(address.host)) {
    std::fprintf(stderr,
                 "gpuleak exporter: note: %s is reachable from other machines; the metrics name "
                 "this node's GPU processes, their users and containers\n",
                 address.host.c_str());
  }
  std::string shown_host =
      address.host.find(':') != std::string::npos ? "[" + address.host + "]" : address.host;
  std::printf("gpuleak exporter: serving http://%s:%d/metrics (sampling every %g s)\n",
              shown_host.c_str(), port, flags.interval_s);
  std::fflush(stdout);

  std::thread waiter([&server, stop_signals] {
    int received = 0;
    sigwait(&stop_signals, &received);
    server.stop();
  });
  server.run();
  // run() can also end without a signal (the socket failed); wake the waiter.
  // SIGTERM is blocked in every thread and the waiter takes it with
  // sigwait: this wakes it, it does not end it.
  pthread_kill(waiter.native_handle(), SIGTERM);  // NOLINT(bugprone-bad-signal-to-kill-thread)
  waiter.join();
  return kExitOk;
}

}  // namespace

void add_exporter_command(CLI::App& app, CommandAction& action) {
  auto flags = std::make_shared<ExporterFlags>();
  auto* sub = app.add_subcommand(
      "exporter", "Serve GPU and per-process memory, growth and leak flags to Prometheus");
  sub->add_option("--listen", flags->listen,
                  "HOST:PORT to serve /metrics on (default " + kDefaultListen + ", loopback only)");
  sub->add_option("--hostname", flags->hostname,
                  "Value of the Hostname label (default $NODE_NAME, else this host's name)");
  sub->add_option("--kubelet-log-root", flags->kubelet_log_root,
                  "Directory with the kubelet's pods/ and containers/ logs, which name pods "
                  "(default /var/log; empty: no pod names)");
  sub->add_option("--pod-resources-socket", flags->pod_resources_socket,
                  std::string("The kubelet's pod-resources socket, which names the pods GPUs "
                              "were allocated to (default ") +
                      monitor::kDefaultPodResourcesSocket + "; empty: not asked)");
  sub->add_option("--interval", flags->interval_s, "Seconds between samples (default 5)")
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--window", flags->window_s,
                  "Seconds of history the trend test looks at (default 600)")
      ->check(CLI::Range(2.0, 86400.0));
  sub->add_option("--min-growth", flags->min_growth_bytes_per_s,
                  "Growth per second below which nothing is called a leak (default 16KiB)")
      ->transform(CLI::AsSizeValue(false));
  sub->add_flag("--no-nvml", flags->no_nvml, "Do not load NVML; export /proc information only");
  sub->add_option("--device-files", flags->device_files,
                  "Glob for GPU device files (default /dev/nvidia*, or $GPULEAK_DEVICE_FILE_GLOB)")
      ->group("");  // hidden: for tests and unusual device layouts
  sub->callback([&action, flags] { action = [flags] { return run_exporter(*flags); }; });
}

}  // namespace gpuleak::cli
