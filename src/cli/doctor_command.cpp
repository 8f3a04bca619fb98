// `gpuleak doctor`: a one-shot diagnosis of who holds GPU memory and why;
// with --kill-orphans, ends the caller's orphaned GPU holders after asking.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "command.h"
#include "monitor/device_files.h"
#include "monitor/doctor.h"
#include "monitor/doctor_json.h"
#include "monitor/doctor_text.h"
#include "monitor/kill_plan.h"
#include "monitor/sample_history.h"
#include "monitor/sample_reader.h"
#include "monitor/trend_tracker.h"
#include "quantity/units.h"
#include "report/json_text.h"

namespace gpuleak::cli {

namespace {

// Between the samples of --watch; shorter for a short watch, so that it
// still takes the samples the trend test needs before it calls anything growing.
constexpr double kWatchIntervalSeconds = 0.25;

struct DoctorFlags {
  bool json = false;
  bool kill_orphans = false;
  bool yes = false;
  bool all_users = false;
  double grace_s = 5.0;
  double watch_s = 0;
  bool fail_on_problems = false;
  bool no_nvml = false;
  std::string device_files;
};

// Asks on the terminal; false unless the answer starts with y.
bool confirm(const monitor::KillRecord& record) {
  std::uint64_t bytes = 0;
  int count = 0;
  for (const auto& candidate : record.candidates) {
    if (!candidate.decision.allowed) continue;
    ++count;
    bytes += candidate.gpu_memory_bytes.value_or(0);
    std::fprintf(stderr, "  PID %d  %s\n", candidate.target.pid,
                 candidate.target.description.c_str());
  }
  std::string held =
      bytes > 0 ? " holding " + quantity::format_bytes(bytes) + " of GPU memory" : "";
  std::string what =
      count == 1 ? "this orphaned process" : std::to_string(count) + " orphaned processes";
  std::fprintf(stderr, "End %s%s (SIGTERM, then SIGKILL)? [y/N] ", what.c_str(), held.c_str());
  std::fflush(stderr);
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return !answer.empty() && (answer[0] == 'y' || answer[0] == 'Y');
}

int run_doctor(const DoctorFlags& flags) {
  if (flags.all_users && getuid() != 0) {
    throw UsageError("--all-users needs root; without it you can end only your own processes");
  }
  // Which processes hold the GPU decides which ones --kill-orphans may end:
  // for that, only the documented default or the explicit flag counts.
  monitor::DeviceFilePattern pattern = monitor::DeviceFilePattern::from_flag_or_environment(
      flags.device_files, /*environment_allowed=*/!flags.kill_orphans);
  const char* from_environment = std::getenv(monitor::kDeviceFileGlobEnv);
  if (flags.kill_orphans && flags.device_files.empty() && from_environment && *from_environment) {
    std::fprintf(stderr,
                 "gpuleak doctor: %s is not used to choose processes to end; with --kill-orphans "
                 "only --device-files changes the GPU device files (default %s)\n",
                 monitor::kDeviceFileGlobEnv, monitor::kDefaultDeviceFileGlob);
  }
  if (std::string notice = pattern.change_notice(); !notice.empty())
    std::fprintf(stderr, "gpuleak doctor: %s\n", notice.c_str());
  monitor::SampleReader source(pattern, !flags.no_nvml);
  monitor::SampleHistory history(monitor::SampleHistory::Options{});
  if (flags.watch_s > 0) {
    // Samples for --watch seconds so that growing memory shows as a trend.
    const std::size_t min_points = monitor::TrendTracker::Options{}.min_points;
    const auto pause = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(
            std::min(kWatchIntervalSeconds, flags.watch_s / static_cast<double>(min_points))));
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(flags.watch_s));
    while (std::chrono::steady_clock::now() < end) {
      history.add(source.take_periodic());
      std::this_thread::sleep_for(pause);
    }
  }
  monitor::RawSample raw = source.take(monitor::ProcScanner::HandleScope::kAll);
  monitor::DoctorReport report = monitor::diagnose(raw, history.add(raw));

  monitor::KillRecord kills;
  bool usage_refusal = false;
  bool kill_failed = false;
  if (flags.kill_orphans) {
    kills.requested = true;
    auto context = monitor::KillContext::for_this_process(flags.all_users);
    kills.candidates = monitor::plan_orphan_kills(report, raw, context);
    bool any_allowed = false;
    for (const auto& candidate : kills.candidates) {
      any_allowed = any_allowed || candidate.decision.allowed;
    }
    if (any_allowed && !flags.yes) {
      if (isatty(STDIN_FILENO) != 1) {
        kills.refused =
            "nothing was ended: confirmation is needed and stdin is not a terminal; pass --yes";
        usage_refusal = true;
      } else if (!confirm(kills)) {
        kills.refused = "nothing was ended: not confirmed";
      }
    }
    if (any_allowed && kills.refused.empty()) {
      auto log = [&kills](const std::string& line) {
        // Logged before the signal is sent, so the record survives whatever follows.
        std::fprintf(stderr, "gpuleak doctor: %s\n", line.c_str());
        std::fflush(stderr);
        kills.log.push_back(line);
      };
      for (const auto& candidate : kills.candidates) {
        if (!candidate.decision.allowed) continue;
        monitor::EndOutcome outcome = monitor::end_process(candidate.target, flags.grace_s, log);
        log(outcome.message);
        kill_failed = kill_failed || outcome.result == monitor::EndResult::kFailed ||
                      outcome.result == monitor::EndResult::kStillRunning;
        kills.outcomes.push_back(std::move(outcome));
      }
    }
  }

  std::string output = flags.json
                           ? report::json_text(monitor::doctor_to_json(report, kills), 2) + "\n"
                           : monitor::render_doctor_text(report, kills);
  if (std::fwrite(output.data(), 1, output.size(), stdout) != output.size() ||
      std::fflush(stdout) != 0)
    throw InputError(std::string("cannot write to stdout: ") + std::strerror(errno));
  if (usage_refusal) {
    std::fprintf(stderr, "gpuleak: %s\n", kills.refused.c_str());
    return kExitUsage;
  }
  if (kill_failed) return kExitFindings;
  if (flags.fail_on_problems && report.has_problems()) return kExitFindings;
  // A diagnosis without the driver is partial; a script that checks the
  // status must not read it as a clean one. --no-nvml asked for exactly that.
  if (!report.gpu_memory_examined() && !flags.no_nvml) return kExitIncomplete;
  return kExitOk;
}

}  // namespace

void add_doctor_command(CLI::App& app, CommandAction& action) {
  auto flags = std::make_shared<DoctorFlags>();
  auto* sub = app.add_subcommand(
      "doctor",
      "Diagnose who holds GPU memory: orphans, zombies, workers with their own CUDA "
      "context, other PID namespaces, unaccounted memory");
  sub->add_flag("--json", flags->json, "Print the diagnosis as JSON");
  auto* kill = sub->add_flag("--kill-orphans", flags->kill_orphans,
                             "End orphaned processes that hold the GPU (yours only; asks first)");
  sub->add_flag("--yes", flags->yes, "Do not ask before ending orphans")->needs(kill);
  sub->add_flag("--all-users", flags->all_users,
                "As root, also end other users' orphaned processes")
      ->needs(kill);
  sub->add_option("--grace", flags->grace_s,
                  "Seconds between SIGTERM and SIGKILL when ending a process (default 5)")
      ->check(CLI::Range(0.0, 600.0))
      ->needs(kill);
  sub->add_option("--watch", flags->watch_s,
                  "Sample for this many seconds first, to also find processes whose memory "
                  "grows (default 0: one look)")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_flag("--fail-on-problems", flags->fail_on_problems,
                "Exit with status 1 when a finding needs action or is a warning");
  sub->add_flag("--no-nvml", flags->no_nvml, "Do not load NVML; use /proc information only");
  sub->add_option("--device-files", flags->device_files,
                  "Glob for GPU device files (default /dev/nvidia*; $GPULEAK_DEVICE_FILE_GLOB too, "
                  "except for --kill-orphans)");
  sub->callback([&action, flags] { action = [flags] { return run_doctor(*flags); }; });
}

}  // namespace gpuleak::cli
