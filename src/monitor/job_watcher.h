// Follows the processes of one job from outside, for `gpuleak run`: the
// program it started, every descendant (found by their parent links as they
// appear), and every process adopted because a trace of it appeared in the
// job's folder (a child re-parented before it was seen). Each sample says
// which of them are alive and in what state, and how much device memory the
// driver lists for each (NVML's per-process figure).
//
// A process is known by pid and start time, so a reused pid is a new
// process. A process keeps belonging to the job after its parent exits,
// which is what makes orphans visible.
//
// Reads /proc and NVML only; it never signals, waits for or reaps anything.
// Not thread-safe: one thread samples.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/processes/process_samples.h"

namespace gpuleak::monitor {

class NvmlLibrary;

class JobWatcher {
 public:
  // `nvml` may be null (then no device memory is sampled); it must outlive
  // the watcher.
  JobWatcher(int main_pid, const NvmlLibrary* nvml);

  // A process that belongs to the job whatever its parent (a trace of it appeared).
  void adopt(int pid);

  // One sample at `time_ns`. Processes that joined the job since the last
  // sample, and members that exec'd another program, are appended to `joined`.
  analysis::ProcessSample sample(std::uint64_t time_ns,
                                 std::vector<analysis::ObservedProcess>* joined);

  // Pids of the job's processes alive at the last sample, zombies excluded.
  std::vector<int> running() const;
  bool is_member(int pid) const { return members_.count(pid) > 0; }

 private:
  struct Member {
    std::uint64_t start_ticks = 0;
    int parent_pid = 0;
    char state = '?';
    bool alive = true;
    // Change when the process execs (a fork's child may be first seen with
    // its parent's command line): read at every sample.
    std::string comm;
    std::vector<std::string> argv;
  };

  static constexpr std::uint64_t kStrangerRecheckEvery = 10;

  std::uint64_t samples_ = 0;
  const NvmlLibrary* nvml_;
  long page_size_bytes_;
  std::map<int, Member> members_;
  std::set<int> adopted_;
  // Processes seen that are not the job's, by pid, with their start time:
  // their parent never changes to a process of the job, so they are not read again.
  std::unordered_map<int, std::uint64_t> strangers_;
};

}  // namespace gpuleak::monitor
