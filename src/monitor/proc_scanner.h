// Reads the process table from /proc: state, parent, group, session, RSS,
// command line, user, container, PID namespace, and open GPU device files.
//
// Cost matters because `gpuleak top` samples once a second: the stat line of
// every process is read each time, the rarely-changing details once per
// process identity (pid + start time, so a reused pid is a new process), and
// the open files of a process -- the expensive part -- only for processes new
// since the last scan, for known holders of a device file, and for pids the
// caller names; a full scan (HandleScope::kAll) looks at every process.
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
  enum class HandleScope {
    kAll,          // every process's open files (doctor; every few samples in top)
    kIncremental,  // new processes, known holders and the extra pids only
  };

  explicit ProcScanner(DeviceFilePattern pattern);

  ProcessTable scan(HandleScope scope, const std::set<int>& extra_handle_pids = {});

  const DeviceFilePattern& pattern() const { return pattern_; }

 private:
  struct Cached {
    std::uint64_t start_ticks = 0;
    std::string comm;
    ProcessInfo details;  // details_read, uid, argv, container, namespaces
    bool handles_known = false;
    HandleScan handle_scan = HandleScan::kNotScanned;
    std::vector<std::string> device_files;
    int device_handle_count = 0;
  };

  void read_details(ProcessInfo& info) const;
  void read_handles(ProcessInfo& info) const;

  DeviceFilePattern pattern_;
  long page_size_bytes_;
  std::unordered_map<int, Cached> cache_;
};

// Reads a whole small file (/proc entries report size 0, so read until EOF).
// Returns false when it cannot be opened or read.
bool read_proc_file(const std::string& path, std::string& out);

}  // namespace gpuleak::monitor
