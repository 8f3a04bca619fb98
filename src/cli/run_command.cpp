// gpuleak run [options] -- PROGRAM ARGS: runs a program with the collector,
// says while it runs when memory leaks, and reports at exit.
#include <dlfcn.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "analysis/processes/process_samples.h"
#include "cli/child_process.h"
#include "cli/command.h"
#include "cli/install_layout.h"
#include "cli/live_watch.h"
#include "cli/report_outputs.h"
#include "cli/trace_folder.h"
#include "monitor/job_watcher.h"
#include "monitor/nvml_library.h"

extern char** environ;

namespace gpuleak::cli {

namespace fs = std::filesystem;

namespace {

struct RunArguments {
  std::vector<std::string> program;
  std::string output_dir;
  ReportFlags flags;
  std::string torch_mode = "auto";
  std::string backend = "auto";
  std::string trace_max_bytes;  // empty: the collector's default (GPULEAK_TRACE_MAX_BYTES)
  bool fail_on_leak = false;
  bool quiet = false;
  bool live = true;
  bool keep_going_without_driver = false;
  double orphan_grace_s = 5.0;
};

std::string program_name(const std::string& argv0) { return fs::path(argv0).filename().string(); }

bool looks_like_python(const std::vector<std::string>& program) {
  std::string name = program_name(program.front());
  return name.starts_with("python") || name == "torchrun" || fs::path(name).extension() == ".py";
}

std::string default_output_dir(const std::string& argv0) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "gpuleak-traces/" + program_name(argv0) + "-" + stamp + "-" + std::to_string(::getpid());
}

// The program's environment: ours, plus what the collector and the Python
// package need.
class Environment {
 public:
  Environment() {
    for (char** e = environ; *e; ++e) {
      std::string entry = *e;
      auto eq = entry.find('=');
      if (eq != std::string::npos) values_[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  std::string get(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? "" : it->second;
  }
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  void prepend_path(const std::string& key, const std::string& value) {
    std::string old = get(key);
    set(key, old.empty() ? value : value + ":" + old);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : values_) out.push_back(fmt::format("{}={}", k, v));
    return out;
  }

 private:
  std::map<std::string, std::string> values_;
};

// Builds the PyTorch allocator hook ahead of time with the program's Python;
// false when that Python cannot (no torch, no compiler).
bool prebuild_torch_hook(const std::vector<std::string>& program, const Environment& env,
                         std::string* why) {
  std::string python =
      program_name(program.front()).starts_with("python") ? program.front() : "python3";
  std::vector<std::string> argv = {python, "-m", "gpuleak.torch_hook", "--build"};
  Environment quiet = env;
  quiet.set("CUDA_INJECTION64_PATH", "");  // the build must not start the collector
  std::string log =
      fs::temp_directory_path() / ("gpuleak-hook-build-" + std::to_string(::getpid()) + ".log");
  std::vector<std::string> shell = {
      "/bin/sh", "-c", "exec \"$0\" \"$@\" >" + log + " 2>&1", argv[0], argv[1], argv[2], argv[3]};
  try {
    ChildProcess build(shell, quiet.entries());
    std::optional<int> status;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    while (!(status = build.poll())) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(build.pid(), SIGKILL);
        *why = "building it took longer than 3 minutes";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (*status == 0) {
      fs::remove(log);
      return true;
    }
  } catch (const InputError& e) {
    *why = e.what();
    return false;
  }
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  fs::remove(log);
  *why = last.empty() ? "it could not be built" : last;
  return false;
}

void configure_torch(const RunArguments& args, Environment& env) {
  if (env.has("PYTORCH_CUDA_ALLOC_CONF")) {
    env.set("GPULEAK_TORCH_MODE", "user");
    return;
  }
  std::string mode = args.torch_mode;
  if (mode == "auto") {
    mode = "hook";
    std::string why;
    if (looks_like_python(args.program) && !prebuild_torch_hook(args.program, env, &why)) {
      std::cerr << "gpuleak: the PyTorch allocator hook is not available (" << why
                << "); switching PyTorch to PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync so the "
                   "driver sees "
                   "every tensor\n";
      mode = "async";
    }
  }
  if (mode == "async") env.set("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync");
  env.set("GPULEAK_TORCH_MODE", mode);
}

std::uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// What `run` sees of the job's processes from outside, written to
// processes.jsonl beside the traces (analysis/processes/process_samples.h).
class JobSampling {
 public:
  JobSampling(const std::string& dir, int main_pid, const monitor::NvmlLibrary* nvml)
      : dir_(dir),
        writer_((fs::path(dir) / analysis::kProcessSamplesFile).string()),
        watcher_(main_pid, nvml) {
    bool available = nvml && nvml->available();
    writer_.write_job(main_pid, monotonic_ns(), unix_ns(), available,
                      nvml ? nvml->unavailable_reason() : "NVML was not loaded");
  }

  void sample() {
    // A process that wrote a trace belongs to the job even if it was
    // re-parented before a sample saw it.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      if (int pid = pid_of_trace_file(entry.path())) watcher_.adopt(pid);
    }
    std::vector<analysis::ObservedProcess> joined;
    analysis::ProcessSample s = watcher_.sample(monotonic_ns(), &joined);
    for (const auto& p : joined) writer_.write_process(p);
    writer_.write_sample(s);
  }

  void main_exited(int status) { writer_.write_main_exit(monotonic_ns(), status); }

  // Samples until every other process of the job has ended or `grace_s`
  // passed; returns the pids still running then.
  std::vector<int> wait_for_the_rest(double grace_s) {
    auto start = std::chrono::steady_clock::now();
    std::vector<int> running;
    double waited = 0;
    for (;;) {
      sample();
      running = watcher_.running();
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (running.empty() || waited >= grace_s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    writer_.write_grace(monotonic_ns(), waited, running);
    return running;
  }

 private:
  std::string dir_;
  analysis::ProcessSampleWriter writer_;
  monitor::JobWatcher watcher_;
};

std::chrono::milliseconds process_sample_interval() {
  const char* text = std::getenv("GPULEAK_PROCESS_SAMPLE_MS");
  long ms = text ? std::atol(text) : 0;
  return std::chrono::milliseconds(ms >= 50 && ms <= 60000 ? ms : 500);
}

bool driver_present() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) return false;
  ::dlclose(driver);
  return true;
}

int run_program(const RunArguments& args) {
  if (args.program.empty())
    throw UsageError("no program to run: gpuleak run [options] -- PROGRAM ARGS");
  InstallLayout layout = locate_install();
  if (layout.collector.empty()) {
    throw InputError(
        "the collector (libgpuleak_collector.so) is not next to this gpuleak; it is only built "
        "where the CUDA toolkit headers are installed");
  }
  analysis::AnalysisOptions options = analysis_options(args.flags);

  std::string dir =
      args.output_dir.empty() ? default_output_dir(args.program.front()) : args.output_dir;
  std::error_code ec;
  make_private_directories(dir);
  refuse_folder_with_traces(dir);
  dir = fs::canonical(dir).string();

  Environment env;
  env.set("CUDA_INJECTION64_PATH", layout.collector);
  env.set("GPULEAK_COLLECTOR", layout.collector);
  env.set("GPULEAK_TRACE_DIR", dir);
  // The driver interposer goes first in LD_PRELOAD so that every entry point
  // the program gets from the driver is wrapped; the collector then records
  // without CUPTI (capture_backend.h) and profilers keep CUPTI for themselves.
  if (!layout.interposer.empty() && args.backend != "cupti") {
    std::string preload = env.get("LD_PRELOAD");
    env.set("LD_PRELOAD", preload.empty() ? layout.interposer : layout.interposer + ":" + preload);
  }
  if (args.backend != "auto") env.set("GPULEAK_BACKEND", args.backend);
  if (!args.trace_max_bytes.empty()) env.set("GPULEAK_TRACE_MAX_BYTES", args.trace_max_bytes);
  if (!layout.python_dir.empty()) {
    env.prepend_path("PYTHONPATH", layout.python_dir);
    env.prepend_path("PYTHONPATH", layout.python_dir + "/boot");
    env.set("GPULEAK_HOLDER_REQUESTS", args.live ? "1" : "0");
  }
  configure_torch(args, env);

  // NVML says how much device memory each process holds (its per-process
  // figure, what nvidia-smi shows); loaded before the program starts so its
  // start-up is not part of the program's time.
  auto nvml = std::make_unique<monitor::NvmlLibrary>();

  int status = 0;
  pid_t program_pid = 0;
  bool program_exited = false;
  std::vector<int> still_running;
  {
    ChildProcess child(args.program, env.entries());
    program_pid = child.pid();
    // Past a file size limit (ulimit -f) our own writes must fail with EFBIG
    // and be reported, not kill gpuleak with SIGXFSZ. Set after the fork, so
    // the program keeps the disposition it was given.
    ::signal(SIGXFSZ, SIG_IGN);
    JobSampling sampling(dir, child.pid(), nvml.get());
    // While it runs, messages may quote the program's own source lines.
    analysis::AnalysisOptions live_options = options;
    live_options.source_lookup.mode = analysis::SourceLookup::Mode::kLocalFiles;
    LiveWatch watch(dir, live_options, /*holder_requests=*/args.live, std::cerr);
    const auto interval = process_sample_interval();
    auto next_sample = std::chrono::steady_clock::now();
    std::optional<int> done;
    while (!(done = child.poll())) {
      if (args.live) watch.poll();
      if (std::chrono::steady_clock::now() >= next_sample) {
        sampling.sample();
        next_sample = std::chrono::steady_clock::now() + interval;
      }
      std::this_thread::sleep_for(
          std::min<std::chrono::milliseconds>(interval, std::chrono::milliseconds(200)));
    }
    status = *done;
    program_exited = child.exited();
    sampling.main_exited(status);
    // The job's other processes get a short grace period to end on their own
    // (DataLoader workers notice their parent is gone within seconds).
    still_running = sampling.wait_for_the_rest(args.orphan_grace_s);
  }
  if (!still_running.empty() && !args.quiet) {
    std::string pids;
    for (int pid : still_running) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    std::cerr << "gpuleak: " << (still_running.size() == 1 ? "PID " : "PIDs ") << pids
              << " of the job " << (still_running.size() == 1 ? "is" : "are")
              << " still running after the main program exited; `gpuleak doctor --kill-orphans` "
                 "ends "
              << (still_running.size() == 1 ? "it" : "them") << "\n";
  }

  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".trace") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    if (!driver_present()) {
      std::cerr << "gpuleak: no NVIDIA driver found on this machine (libcuda.so.1 cannot be "
                   "loaded), so the "
                   "program could not use a GPU and nothing was recorded\n";
      return status != 0 ? status : kExitInput;
    }
    std::cerr << "gpuleak: the program " << describe_exit_status(status)
              << " without initializing CUDA, so nothing was recorded\n";
    return status;
  }
  // Symbols and source lines resolved now, on the machine that has the
  // binaries and the sources, travel with the traces; not into the trace of a
  // process that is still running (it is still appending to it).
  std::vector<std::string> finished;
  for (const auto& file : files) {
    int pid = pid_of_trace_file(file);
    if (std::find(still_running.begin(), still_running.end(), pid) == still_running.end())
      finished.push_back(file);
  }
  std::vector<std::string> problems = embed_symbols_and_sources(finished);
  TraceReports reports = analyze_traces(files, options);
  analysis::JobReport job = analyze_job_of(files, reports.processes);
  for (std::string& problem :
       write_outputs(reports, job, args.flags, options, args.quiet ? nullptr : &std::cerr))
    problems.push_back(std::move(problem));
  // The program's own process exited, so its collector wrote an exit record
  // at exit; a trace without one stopped being written (a full disk, the
  // collector disabled itself, os._exit): its end is missing.
  if (program_exited) {
    for (const auto& r : reports.processes) {
      // (With events lost, the exit record may be one of them: the report
      // says how many were lost.)
      if (r.process.pid == static_cast<std::uint32_t>(program_pid) && !r.exited &&
          r.trace_error.empty() && r.lost_events == 0) {
        problems.push_back(r.trace_path +
                           ": the program exited, but its trace has no exit record: the trace "
                           "stopped being written before the end, so its last events are missing");
      }
    }
  }
  if (!args.quiet) {
    std::cerr << "\ngpuleak: traces in " << dir << " (gpuleak report " << dir << ")\n";
    if (status != 0) std::cerr << "gpuleak: the program " << describe_exit_status(status) << "\n";
  }
  bool trouble = print_trace_problems(reports, std::cerr) > 0;
  for (const std::string& problem : problems) std::cerr << "gpuleak: " << problem << "\n";
  trouble = trouble || !problems.empty();
  // The program's own failure comes first; then gpuleak's: a CI gate never
  // passes on a trace that is cut, damaged or not reported.
  if (status != 0) return status;
  if (trouble) return kExitInput;
  if (args.fail_on_leak) return fail_on_leak_status(reports, job, std::cerr);
  return status;
}

}  // namespace

void add_run_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<RunArguments>();
  CLI::App* command = app.add_subcommand(
      "run", "Run a program with GPU memory tracking; report leaks while it runs and at exit");
  command->add_option("-o,--output", args->output_dir,
                      "Folder for the traces (default: gpuleak-traces/<program>-<time>)");
  add_report_flags(*command, args->flags, /*json_to_stdout_flag=*/false);
  command->add_flag(
      "--fail-on-leak", args->fail_on_leak,
      "Exit with status 1 when anything leaked and the program itself succeeded, 3 when data is "
      "missing (a CI gate)");
  command->add_flag("-q,--quiet", args->quiet,
                    "Do not print the report at exit (files are still written)");
  command
      ->add_option("--orphan-grace", args->orphan_grace_s,
                   "Seconds to wait, after the program exits, for its other processes to end "
                   "before naming them as orphans")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  command->add_flag("!--no-live", args->live,
                    "No verdicts while the program runs (and no holder requests)");
  command
      ->add_option("--torch-mode", args->torch_mode,
                   "How PyTorch tensors are tracked: auto, hook (allocator trace tracker), async "
                   "(cudaMallocAsync backend), off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "hook", "async", "off"}));
  command
      ->add_option("--backend", args->backend,
                   "Where driver calls are captured: auto (the preloaded interposer, CUPTI where "
                   "the interposer cannot see every call), interposer, cupti")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "interposer", "cupti"}));
  command
      ->add_option("--trace-max-bytes", args->trace_max_bytes,
                   "The most disk one process's trace takes (bytes, or with K, M or G; default "
                   "2G, at least 16M; 0: no bound): past half of it the trace is compacted into a "
                   "summary")
      ->check([](const std::string& text) -> std::string {
        std::size_t digits = 0;
        while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
        bool suffix = digits + 1 == text.size() &&
                      std::string("KkMmGg").find(text.back()) != std::string::npos;
        if (digits == 0 || (digits != text.size() && !suffix))
          return "a byte count: digits, optionally followed by K, M or G";
        return "";
      });
  command->add_option("program", args->program, "The program and its arguments, after --")
      ->required();
  command->callback([&action, args] { action = [args] { return run_program(*args); }; });
}

}  // namespace gpuleak::cli
