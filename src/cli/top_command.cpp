// `gpuleak top`: a live view of GPU memory and host RSS per process, with
// trends, leak flags and time until full. Redraws in place on a terminal,
// prints plain blocks in a pipe, one JSON object per sample with --json.
#include <fmt/format.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "command.h"
#include "monitor/device_files.h"
#include "monitor/sample_history.h"
#include "monitor/sample_json.h"
#include "monitor/sample_reader.h"
#include "monitor/top_text.h"
#include "report/json_text.h"

namespace gpuleak::cli {

namespace {

struct TopFlags {
  double interval_s = 1.0;
  std::size_t count = 0;
  bool json = false;
  double window_s = 300;
  std::uint64_t min_growth_bytes_per_s = 16 * 1024;
  std::vector<int> pids;
  bool no_nvml = false;
  std::string device_files;
};

volatile std::sig_atomic_t g_stop_requested = 0;

void request_stop(int) { g_stop_requested = 1; }

// SIGINT/SIGTERM end the loop after the current sample instead of killing
// the process mid-line; no SA_RESTART, so a sleep wakes up at once.
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A closed pipe (`gpuleak top | head`) shows up as a failed write instead.
  signal(SIGPIPE, SIG_IGN);
}

void sleep_until(std::chrono::steady_clock::time_point deadline) {
  while (!g_stop_requested) {
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    poll(nullptr, 0, static_cast<int>(ms));  // returns early on a signal
  }
}

std::size_t terminal_width() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 0;
}

// Redraws in place: home, each line cleared to its end, the rest cleared.
std::string in_place(const std::string& text) {
  std::string out = "\x1b[H";
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    out.append(text, at, end - at);
    out += "\x1b[K\n";
    at = end + 1;
  }
  out += "\x1b[J";
  return out;
}

bool write_out(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) return false;
  return std::fflush(stdout) == 0;
}

int run_top(const TopFlags& flags) {
  monitor::DeviceFilePattern pattern =
      monitor::DeviceFilePattern::from_flag_or_environment(flags.device_files);
  if (std::string notice = pattern.change_notice(); !notice.empty())
    std::fprintf(stderr, "gpuleak top: %s\n", notice.c_str());
  monitor::SampleReader source(pattern, !flags.no_nvml);
  monitor::SampleHistory::Options options;
  options.trend.window_s = flags.window_s;
  options.trend.min_growth_bytes_per_s = static_cast<double>(flags.min_growth_bytes_per_s);
  options.watch_pids = std::set<int>(flags.pids.begin(), flags.pids.end());
  monitor::SampleHistory history(options);

  const bool terminal = !flags.json && isatty(STDOUT_FILENO) == 1;
  monitor::TopTextOptions text_options;
  text_options.interval_s = flags.interval_s;
  text_options.window_s = flags.window_s;
  if (!terminal && !flags.json && !source.nvml_status().available) {
    // In a pipe the note would repeat every block; say it once on stderr too.
    std::fprintf(stderr, "gpuleak top: %s\n", source.nvml_status().message.c_str());
  }

  install_stop_handlers();
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(flags.interval_s));
  auto next = std::chrono::steady_clock::now();
  if (terminal) write_out("\x1b[2J");
  for (std::size_t taken = 0; !g_stop_requested && (flags.count == 0 || taken < flags.count);
       ++taken) {
    monitor::RawSample raw = source.take_periodic(options.watch_pids);
    monitor::Sample sample = history.add(raw);
    std::string text;
    if (flags.json) {
      text = report::json_text(monitor::sample_to_json(sample)) + "\n";
    } else if (terminal) {
      text_options.max_width = terminal_width();
      text = in_place(monitor::render_top_text(sample, text_options));
    } else {
      text = monitor::render_top_text(sample, text_options) + "\n";
    }
    if (!write_out(text)) {
      if (errno == EPIPE) return kExitOk;  // the reader went away
      throw InputError(std::string("cannot write to stdout: ") + std::strerror(errno));
    }
    if (flags.count != 0 && taken + 1 == flags.count) break;
    next += interval;
    // Never bunch samples up after a slow one; keep the rhythm from now on.
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now();
    sleep_until(next);
  }
  return kExitOk;
}

}  // namespace

void add_top_command(CLI::App& app, CommandAction& action) {
  auto flags = std::make_shared<TopFlags>();
  auto* sub = app.add_subcommand(
      "top", "Live view of GPU memory and host RSS per process, with trends and leak flags");
  sub->add_option("--interval", flags->interval_s, "Seconds between samples (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--count", flags->count,
                  "Stop after this many samples (default: run until Ctrl-C)");
  sub->add_flag("--json", flags->json, "Print one JSON object per sample instead of the table");
  sub->add_option("--window", flags->window_s,
                  "Seconds of history the trend test looks at (default 300)")
      ->check(CLI::Range(2.0, 86400.0));
  sub->add_option("--min-growth", flags->min_growth_bytes_per_s,
                  "Growth per second below which nothing is called a leak (default 16KiB)")
      ->transform(CLI::AsSizeValue(false));
  sub->add_option("--pid", flags->pids, "Also show this process (repeatable), GPU or not")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--no-nvml", flags->no_nvml, "Do not load NVML; show /proc information only");
  sub->add_option("--device-files", flags->device_files,
                  "Glob for GPU device files (default /dev/nvidia*, or $GPULEAK_DEVICE_FILE_GLOB)")
      ->group("");  // hidden: for tests and unusual device layouts
  sub->callback([&action, flags] { action = [flags] { return run_top(*flags); }; });
}

}  // namespace gpuleak::cli
