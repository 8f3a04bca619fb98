// Reads the process table from /proc: state, parent, group, session, RSS,
// command line, user, container, PID namespace, and open GPU device files.
//
// Cost matters because `gpuleak top` samples once a second on nodes with
// hundreds of processes. A full scan (HandleScope::kAll) reads everything.
// An incremental scan reads /proc's directory listing, and then only:
//   * every process new since the last scan (stat, details, open files);
//   * young processes (started less than young_process_s ago): their stat
//     and open files again, because a program typically initializes CUDA in
//     its first seconds;
//   * the "watched" processes -- known holders of a GPU device file, the
//     pids the caller names (those the driver lists, --pid), and their
//     parents, group leaders and children -- whose stat line is re-read so
//     state, RSS and parentage are current (and whose open files are re-read
//     while they hold none, so a listed pid's files are found);
// and carries everything else over from the previous scan. Details (command
// line, user, container) are read once per process identity (pid + start
// time, so a reused pid is a new process). An old process that opens or
// closes a GPU file is seen at the next full scan.
//
// Ownership: the scanner owns its cache. Not thread-safe: one thread scans.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "monitor/device_files.h"
#include "monitor/process_info.h"

namespace gpuleak::monitor {

struct ProcessTable {
  std::map<int, ProcessInfo> processes;  // by pid
  std::uint64_t own_pid_namespace = 0;   // inode of our own PID namespace
  // Processes whose open files could not be read (owned by another user and
  // we are not root); their device handles are unknown.
  int handle_scans_denied = 0;
  std::set<uid_t> denied_owners;

  const ProcessInfo* find(int pid) const;
};

class ProcScanner {
 public:
  static constexpr double kYoungProcessSeconds = 10.0;

  enum class HandleScope {
    kAll,          // every process's open files (doctor; every few samples in top)
    kIncremental,  // new processes and the watched ones only (see above)
  };

  explicit ProcScanner(DeviceFilePattern pattern, double young_process_s = kYoungProcessSeconds);

  // `watch_pids`: processes whose stat line must be current in this scan.
  ProcessTable scan(HandleScope scope, const std::set<int>& watch_pids = {});

  const DeviceFilePattern& pattern() const { return pattern_; }

 private:
  void read_details(ProcessInfo& info) const;
  void read_handles(ProcessInfo& info) const;
  // Holders and `watch_pids`, with their parents, group leaders and children,
  // as the previous scan knew them.
  std::set<int> fresh_pids(const std::set<int>& watch_pids, double uptime_s) const;
  bool is_young(const ProcessInfo& info, double uptime_s) const;

  DeviceFilePattern pattern_;
  long page_size_bytes_;
  double young_process_s_;
  double ticks_per_s_;
  std::unordered_map<int, ProcessInfo> cache_;  // the previous scan, by pid
};

// A note for people when /proc hides other users' processes from us (mounted
// with hidepid and we are not root); empty otherwise. `mountinfo_text` is the
// content of /proc/self/mountinfo.
std::string hidden_processes_note(const std::string& mountinfo_text, bool running_as_root);

// Reads a whole small file (/proc entries report size 0, so read until EOF).
// Returns false when it cannot be opened or read.
bool read_proc_file(const std::string& path, std::string& out);

// Whether a /proc directory entry is a process: its name is all digits.
bool is_pid_entry(const char* name);

}  // namespace gpuleak::monitor
