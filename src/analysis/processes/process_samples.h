// The job's processes as `gpuleak run` saw them from outside: the file
// processes.jsonl beside the traces (format in docs/processes.md). This
// header owns the format: the writer `run` uses and the reader `report` uses.
//
// One JSON object per line, each with a "record" field:
//   job        schema, the main program's pid, when sampling began, NVML status
//   process    a process of the job, first seen: pid, start time, parent, name, argv
//   sample     at one moment: the job's live processes (pid, state, parent),
//              their device memory as the driver counts it (NVML), and the
//              devices' totals
//   main_exit  the main program ended, with its exit status
//   grace      `run` stopped waiting for the job's other processes: who was alive
// Lines are written whole and flushed one by one, so a killed `run` leaves a
// readable prefix; the reader skips a damaged line and counts it.
//
// Times are CLOCK_MONOTONIC nanoseconds, the clock of the traces' events.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::analysis {

inline constexpr const char* kProcessSamplesFile = "processes.jsonl";
inline constexpr const char* kProcessSamplesSchema = "gpuleak-processes/1";

struct ObservedProcess {
  int pid = 0;
  std::uint64_t start_ticks = 0;  // /proc/PID/stat field 22: with the pid, the process's identity
  int parent_pid = 0;             // when first seen
  std::string comm;               // the kernel's name of its main thread ("pt_data_worker")
  std::vector<std::string> argv;
  std::uint64_t first_seen_ns = 0;
};

struct ObservedState {
  int pid = 0;
  char state = '?';  // R, S, D, Z (zombie), T, ...
  int parent_pid = 0;
};

struct ObservedGpuUse {
  int pid = 0;
  int device = 0;
  std::optional<std::uint64_t> used_bytes;  // empty: the driver does not say
};

struct ObservedDevice {
  int device = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t total_bytes = 0;
};

struct ProcessSample {
  std::uint64_t time_ns = 0;
  std::vector<ObservedState> alive;  // the job's processes that exist (zombies included)
  std::vector<ObservedGpuUse> gpu;   // the job's processes the driver lists
  std::vector<ObservedDevice> devices;
  // Pids the driver lists that are not the job's: other jobs, or pids of
  // another PID namespace (then the job's own memory may be among them).
  std::vector<int> other_gpu_pids;
};

struct JobObservations {
  // The host these processes ran on: set by the caller from the traces
  // beside processes.jsonl (the file does not say); empty: the job's host
  // is taken from the main program's trace.
  std::string host;
  int main_pid = 0;
  std::uint64_t start_monotonic_ns = 0;
  std::uint64_t start_unix_ns = 0;
  bool nvml_available = false;
  std::string nvml_message;  // why not, or a read problem
  std::vector<ObservedProcess> processes;
  std::vector<ProcessSample> samples;  // in time order
  std::optional<std::uint64_t> main_exit_ns;
  int main_exit_status = -1;
  std::optional<std::uint64_t> grace_end_ns;
  double grace_waited_s = 0;
  std::vector<int> alive_after_grace;
  std::uint64_t damaged_lines = 0;

  const ObservedProcess* process(int pid) const;
};

class ProcessSampleWriter {
 public:
  // Opens (truncates) `path`; ok() says whether it could.
  explicit ProcessSampleWriter(const std::string& path);
  bool ok() const { return static_cast<bool>(out_); }

  void write_job(int main_pid, std::uint64_t start_monotonic_ns, std::uint64_t start_unix_ns,
                 bool nvml_available, const std::string& nvml_message);
  void write_process(const ObservedProcess& process);
  void write_sample(const ProcessSample& sample);
  void write_main_exit(std::uint64_t time_ns, int status);
  void write_grace(std::uint64_t time_ns, double waited_s, const std::vector<int>& alive);

 private:
  void write_line(const std::string& line);
  std::ofstream out_;
};

// Reads the file; nullopt when it cannot be opened or holds no job record.
std::optional<JobObservations> read_process_samples(const std::string& path);

}  // namespace gpuleak::analysis
