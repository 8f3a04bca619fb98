// gpuleak attach PID: records a running Python process from now on, for a
// bounded time, without restarting it; then the usual report.
//
// The steps, each bounded: check that the process may be joined
// (attach/attach.h), find its interpreter, have it run the boot source at
// its next safe point (python_boot.h), wait for the agent's `started.json`,
// follow the trace as `run` does (LEAK lines, holder requests), ask the
// agent to stop at the bound or on Ctrl-C, wait for `stopped.json`, report.
// The handshake files live in a private control folder inside the output
// folder (docs/attach.md).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "attach/attach.h"
#include "cli/command.h"
#include "cli/install_layout.h"
#include "cli/live_watch.h"
#include "cli/python_boot.h"
#include "cli/report_outputs.h"
#include "cli/trace_folder.h"

namespace gpuleak::cli {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Without --duration or --steps, the recording lasts this long.
constexpr double kDefaultDurationS = 60.0;
// With --steps alone, the recording ends after this long at most.
constexpr double kStepsTimeLimitS = 3600.0;
// gpuleak asks the agent to stop this long after the bound, if it has not.
constexpr double kBoundGraceS = 2.0;
// After a stop was asked, the agent has this long to close the trace
// (holder walks still running are waited for up to 10 s).
constexpr double kStopWaitS = 45.0;

struct AttachArguments {
  int pid = 0;
  std::optional<double> duration_s;
  std::optional<std::uint64_t> steps;
  std::string output_dir;
  double start_timeout_s = 30.0;
  bool dry_run = false;
  bool fail_on_leak = false;
  ReportFlags flags;
};

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int signal) { g_stop_signal.store(signal); }

// Ctrl-C, kill and a closed terminal detach instead of ending gpuleak: the
// agent must be told to stop and the trace read.
void catch_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
}

// Blocks those signals while the target's thread is held: a tracer that
// ended between changing registers and putting them back would leave the
// thread running an injected call (attach/attach.h).
class StopSignalsHeld {
 public:
  StopSignalsHeld() {
    sigset_t held;
    sigemptyset(&held);
    for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) sigaddset(&held, signal);
    ::sigprocmask(SIG_BLOCK, &held, &previous_);
  }
  ~StopSignalsHeld() { ::sigprocmask(SIG_SETMASK, &previous_, nullptr); }
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

 private:
  sigset_t previous_{};
};

std::string process_name(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name.empty() ? "process" : name;
}

// The process's start time in clock ticks since boot (/proc/PID/stat field
// 22): with the pid, it names one process even when pids are reused.
std::uint64_t start_ticks(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stoull(field);
  }
  return 0;
}

// A zombie has ended: its parent has only not reaped it yet.
bool process_alive(int pid, std::uint64_t ticks) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  char state = text[close + 2];
  return ticks != 0 && state != 'Z' && state != 'X' && start_ticks(std::to_string(pid)) == ticks;
}

std::string default_output_dir(int pid) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "gpuleak-traces/attach-" + process_name(pid) + "-" + std::to_string(pid) + "-" + stamp;
}

std::optional<nlohmann::json> read_handshake(const fs::path& control, const char* name) {
  std::ifstream in(control / name);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

void ask_to_stop(const fs::path& control) { std::ofstream(control / "stop") << "stop\n"; }

// A root gpuleak attaching to another user's process: the process writes
// the trace and the handshake files, so the folders must be its user's.
void give_to_target_user(const std::string& path, int pid) {
  struct stat target {};
  if (::geteuid() != 0 || ::stat(("/proc/" + std::to_string(pid)).c_str(), &target) != 0) return;
  if (target.st_uid == 0) return;
  if (::chown(path.c_str(), target.st_uid, target.st_gid) != 0)
    throw InputError("cannot give " + path + " to the user of PID " + std::to_string(pid));
}

// Whether the process has loaded the CUDA driver: a CUDA program without
// Python is joined by loading the collector into it.
bool uses_cuda_driver(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("/libcuda.so") != std::string::npos) return true;
  }
  return false;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

std::string bound_text(const AttachArguments& args, double duration_s) {
  std::string bound;
  if (args.steps) bound = std::to_string(*args.steps) + " steps";
  if (!args.steps || args.duration_s) {
    if (!bound.empty()) bound += " or ";
    bound += seconds_text(duration_s);
  }
  return bound + (args.steps && args.duration_s ? ", whichever comes first" : "");
}

void print_native_dry_run(const AttachArguments& args, const std::string& collector,
                          const std::string& dir, double duration_s) {
  std::string who = "PID " + std::to_string(args.pid) + " (" + process_name(args.pid) + ")";
  std::cout << "gpuleak attach --dry-run: nothing was done. " << who
            << " runs no Python but uses the CUDA driver. It would:\n"
            << "  1. stop one thread of it that waits in a system call (futex, poll, nanosleep...) "
               "for a few milliseconds (ptrace)\n"
            << "  2. map one page in it, putenv() gpuleak's settings and dlopen() " << collector
            << " on that thread\n"
            << "  3. call gpuleak_attach_start(), which starts a thread that subscribes to the "
               "driver's allocation calls through CUPTI from then on, and detach\n"
            << "  4. record into " << dir << " for " << seconds_text(duration_s)
            << " (memory allocated before has no stack), then close the trace and report\n";
}

void print_dry_run(const AttachArguments& args, const attach::PythonInterpreter& python,
                   const std::string& dir, double duration_s) {
  char addresses[128];
  std::snprintf(addresses, sizeof addresses,
                "Py_AddPendingCall at 0x%llx, PyRun_SimpleString at 0x%llx",
                static_cast<unsigned long long>(python.add_pending_call),
                static_cast<unsigned long long>(python.run_simple_string));
  std::string who = "PID " + std::to_string(args.pid) + " (" + process_name(args.pid) + ")";
  std::cout << "gpuleak attach --dry-run: nothing was done. It would:\n"
            << "  1. stop the main thread of " << who << " for a few milliseconds (ptrace)\n"
            << "  2. map one page in it and write a short Python boot string there\n"
            << "  3. queue it with CPython " << python.major << "." << python.minor << "'s "
            << addresses << " (in " << python.file << ")\n"
            << "  4. put the thread's registers back and detach; the interpreter runs the boot at "
               "its next safe point, which loads gpuleak's package and collector\n"
            << "  5. record into " << dir << " for " << bound_text(args, duration_s)
            << ", then close the trace and report\n";
}

int attach_to(const AttachArguments& args) {
  std::string refusal = attach::why_not_attachable(args.pid);
  if (!refusal.empty()) throw InputError("cannot attach: " + refusal);
  attach::PythonInterpreter python;
  std::string why;
  bool is_python = attach::find_python_interpreter(args.pid, &python, &why);
  if (!is_python && why.find("is not a Python process") == std::string::npos)
    throw InputError("cannot attach: " + why);
  if (!is_python && !uses_cuda_driver(args.pid))
    throw InputError("cannot attach: " + why + ", nor a CUDA program (libcuda.so is not loaded)");
  if (!is_python && args.steps)
    throw UsageError("PID " + std::to_string(args.pid) +
                     " runs no Python, so gpuleak counts no steps in it: use --duration");
  if (is_python && (python.major != 3 || python.minor < attach::kOldestPythonMinor ||
                    python.minor > attach::kNewestPythonMinor)) {
    throw InputError("cannot attach: PID " + std::to_string(args.pid) + " runs CPython " +
                     std::to_string(python.major) + "." + std::to_string(python.minor) +
                     "; gpuleak attach knows CPython 3." +
                     std::to_string(attach::kOldestPythonMinor) + " to 3." +
                     std::to_string(attach::kNewestPythonMinor));
  }
  InstallLayout layout = locate_install();
  if (layout.collector.empty() || layout.python_dir.empty())
    throw InputError("this gpuleak has no " +
                     std::string(layout.collector.empty() ? "collector" : "Python package") +
                     " beside it (install the wheel, or build with scripts/setup)");
  double duration_s =
      args.duration_s ? *args.duration_s : (args.steps ? kStepsTimeLimitS : kDefaultDurationS);
  std::string dir = args.output_dir.empty() ? default_output_dir(args.pid) : args.output_dir;
  if (args.dry_run) {
    if (is_python)
      print_dry_run(args, python, dir, duration_s);
    else
      print_native_dry_run(args, layout.collector, dir, duration_s);
    return kExitOk;
  }
  analysis::AnalysisOptions options = analysis_options(args.flags);
  make_private_directories(dir);
  refuse_folder_with_traces(dir);
  dir = fs::canonical(dir).string();
  give_to_target_user(dir, args.pid);
  fs::path control = fs::path(dir) / ".attach";
  std::error_code ec;
  fs::remove_all(control, ec);
  make_private_directories(control.string());
  give_to_target_user(control.string(), args.pid);

  std::uint64_t target_ticks = start_ticks(std::to_string(args.pid));
  nlohmann::json settings = {
      {"python_dir", layout.python_dir},
      {"collector", layout.collector},
      {"cli", fs::read_symlink("/proc/self/exe", ec).string()},
      {"trace_dir", dir},
      {"control_dir", control.string()},
      {"duration_s", duration_s},
      {"steps", args.steps.value_or(0)},
      {"cli_pid", static_cast<int>(::getpid())},
      {"cli_start_ticks", start_ticks("self")},
      {"start_deadline_unix_s", static_cast<double>(std::time(nullptr)) + args.start_timeout_s}};

  catch_stop_signals();
  bool scheduled = false;
  {
    StopSignalsHeld held;
    if (is_python) {
      scheduled = attach::schedule_python_source(args.pid, python, python_boot_source(settings),
                                                 attach::Limits{}, &why);
    } else {
      long started_thread = 0;
      scheduled = attach::load_library(
          args.pid, layout.collector,
          {"GPULEAK_TRACE_DIR=" + dir, "GPULEAK_ATTACH_CONTROL=" + control.string(),
           "GPULEAK_ATTACH_GPULEAK_PID=" + std::to_string(::getpid()),
           "GPULEAK_ATTACH_GPULEAK_TICKS=" + std::to_string(start_ticks("self")),
           "GPULEAK_ATTACH_DURATION_S=" + std::to_string(duration_s)},
          "gpuleak_attach_start", attach::Limits{}, &started_thread, &why);
      if (scheduled && started_thread != 1) {
        scheduled = false;
        why = "the collector could not start its session thread in the process";
      }
    }
  }
  if (!scheduled) {
    fs::remove_all(control, ec);
    throw InputError("could not attach to PID " + std::to_string(args.pid) + ": " + why);
  }

  // The boot runs at the interpreter's next safe point: at once in a
  // program that runs Python code, never in one blocked in C for ever.
  auto give_up = Clock::now() + std::chrono::duration<double>(args.start_timeout_s);
  std::optional<nlohmann::json> started;
  while (!(started = read_handshake(control, "started.json"))) {
    if (auto failed = read_handshake(control, "failed.json")) {
      throw InputError("the agent in PID " + std::to_string(args.pid) +
                       " did not start: " + failed->value("reason", std::string("unknown")));
    }
    if (!process_alive(args.pid, target_ticks))
      throw InputError("PID " + std::to_string(args.pid) + " ended before recording started");
    if (g_stop_signal.load() || Clock::now() > give_up) {
      ask_to_stop(control);  // a boot that runs later sees it and does nothing
      if (g_stop_signal.load())
        throw InputError("interrupted before PID " + std::to_string(args.pid) +
                         " started recording; nothing was recorded");
      throw InputError("PID " + std::to_string(args.pid) + " did not run gpuleak's boot within " +
                       seconds_text(args.start_timeout_s) +
                       ": its main thread is not running Python code (blocked in C code, or "
                       "waiting); it was left as it was (--start-timeout waits longer)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string runtime =
      is_python ? "CPython " + std::to_string(python.major) + "." + std::to_string(python.minor)
                : std::string("CUDA driver calls");
  std::cerr << "gpuleak: attached to PID " << args.pid << " (" << process_name(args.pid) << ", "
            << runtime << "); recording for " << bound_text(args, duration_s) << " into " << dir
            << "; Ctrl-C detaches\n";

  analysis::AnalysisOptions live_options = options;
  live_options.source_lookup.mode = analysis::SourceLookup::Mode::kLocalFiles;
  std::optional<nlohmann::json> stopped;
  bool target_ended = false;
  {
    LiveWatch watch(dir, live_options, /*holder_requests=*/true, std::cerr);
    // The agent ends at the bound by itself (its reason is then "duration"
    // or "steps"); gpuleak asks only if it has not a moment later.
    auto bound = Clock::now() + std::chrono::duration<double>(duration_s + kBoundGraceS);
    std::optional<Clock::time_point> asked;
    while (!(stopped = read_handshake(control, "stopped.json"))) {
      watch.poll();
      if (!process_alive(args.pid, target_ticks)) {
        target_ended = true;
        break;
      }
      if (!asked && (g_stop_signal.load() || Clock::now() >= bound)) {
        ask_to_stop(control);
        asked = Clock::now();
      }
      if (asked && Clock::now() - *asked > std::chrono::duration<double>(kStopWaitS)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (target_ended) {
    std::cerr << "gpuleak: PID " << args.pid << " ended during the attach; the report covers "
              << "what it did until then\n";
  } else if (!stopped) {
    std::cerr << "gpuleak: PID " << args.pid << " did not close its trace within "
              << seconds_text(kStopWaitS) << "; reporting what it wrote so far\n";
  } else {
    std::cerr << "gpuleak: detached from PID " << args.pid << " (" << stopped->value("steps", 0)
              << " steps recorded; it keeps running without gpuleak)\n";
  }
  fs::remove_all(control, ec);

  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".trace") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError("PID " + std::to_string(args.pid) + " wrote no trace");
  // Symbols only into a closed trace (a process still writing would append after them).
  std::vector<std::string> problems;
  if (stopped || target_ended) problems = embed_symbols_and_sources(files);
  TraceReports reports = analyze_traces(files, options);
  analysis::JobReport job = analyze_job_of(files, reports.processes);
  for (std::string& problem : write_outputs(reports, job, args.flags, options, &std::cout))
    problems.push_back(std::move(problem));
  std::cerr << "gpuleak: trace in " << dir << " (gpuleak report " << dir << ")\n";
  bool trouble = print_trace_problems(reports, std::cerr) > 0;
  for (const std::string& problem : problems) std::cerr << "gpuleak: " << problem << "\n";
  if (trouble || !problems.empty()) return kExitInput;
  if (args.fail_on_leak) return fail_on_leak_status(reports, job, std::cerr);
  return kExitOk;
}

}  // namespace

void add_attach_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<AttachArguments>();
  CLI::App* command = app.add_subcommand(
      "attach",
      "Record a running Python process from now on, for a while, without restarting it; then "
      "report (docs/attach.md)");
  command->add_option("pid", args->pid, "The process to join")->required();
  command
      ->add_option("--duration", args->duration_s,
                   "Seconds to record (default 60; with --steps alone, at most 3600)")
      ->check(CLI::Range(0.1, 7.0 * 24 * 3600));
  command->add_option("--steps", args->steps, "Steps to record (optimizer steps, batches)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  command->add_option("-o,--output", args->output_dir,
                      "Folder for the trace (default: gpuleak-traces/attach-<name>-<pid>-<time>)");
  command
      ->add_option("--start-timeout", args->start_timeout_s,
                   "Seconds to wait for the process to reach a safe point and start recording")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  command->add_flag("--dry-run", args->dry_run, "Say what would be done, and do nothing");
  command->add_flag("--fail-on-leak", args->fail_on_leak,
                    "Exit with status 1 when the recording shows a leak");
  add_report_flags(*command, args->flags, /*json_to_stdout_flag=*/false);
  command->callback([&action, args] { action = [args] { return attach_to(*args); }; });
}

}  // namespace gpuleak::cli
