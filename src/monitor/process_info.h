// One process as /proc shows it. Plain values; copied freely.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::monitor {

// How far the open files of a process could be inspected.
enum class HandleScan {
  kNotScanned,  // not looked at in this sample (cheap samples skip most processes)
  kScanned,     // every fd was read
  kDenied,      // /proc/PID/fd is not readable: another user's process and we are not root
  kGone,        // the process ended while being read
};

struct ProcessInfo {
  // From /proc/PID/stat, read for every process in every sample.
  int pid = 0;
  int ppid = 0;
  int pgid = 0;      // process group; a shell job or the process that started the group
  int sid = 0;       // session
  char state = '?';  // R, S, D, Z (zombie), T, t, X, I
  std::string comm;  // the kernel's 15-character name; DataLoader workers say "pt_data_worker"
  std::uint64_t start_ticks = 0;  // start time after boot, in clock ticks; pid + this = identity
  std::uint64_t rss_bytes = 0;
  std::uint64_t cpu_ticks = 0;  // user + system time
  int threads = 0;
  bool kernel_thread = false;

  // Read once per process identity (and again on full rescans).
  bool details_read = false;
  std::optional<uid_t> uid;       // real uid; empty when status could not be read
  std::vector<std::string> argv;  // empty for kernel threads, zombies, or when unreadable
  std::string container_id;       // 64 hex digits from the cgroup path; empty on the host
  std::string pod_uid;  // Kubernetes pod UID from the cgroup path (pod_cgroup.h); or empty
  std::uint64_t pid_namespace = 0;  // inode of /proc/PID/ns/pid; 0 when unreadable
  int namespace_pid = 0;            // the pid inside its own (innermost) PID namespace; 0 unknown

  // Open GPU device files.
  HandleScan handle_scan = HandleScan::kNotScanned;
  std::vector<std::string> device_files;  // distinct paths, sorted
  int device_handle_count = 0;            // fds pointing at them

  bool is_zombie() const { return state == 'Z'; }
  bool holds_device_handles() const { return device_handle_count > 0; }
  // "python3 train.py --epochs 3", or "[comm]" when the command line is unknown.
  std::string command_line() const;
};

// Parses one /proc/PID/stat line into `out` (the stat fields only).
// Returns false on a malformed line. The name in parentheses may itself
// contain spaces and parentheses, so the last ')' ends it.
bool parse_proc_stat(const std::string& line, long page_size_bytes, ProcessInfo& out);

// The pid inside the innermost namespace, from the "NSpid:" line of /proc/PID/status.
int parse_innermost_namespace_pid(const std::string& status_text);
// The real uid, from the "Uid:" line of /proc/PID/status.
std::optional<uid_t> parse_real_uid(const std::string& status_text);

}  // namespace gpuleak::monitor
