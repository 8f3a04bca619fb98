#include "monitor/proc_scanner.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "monitor/container_id.h"
#include "monitor/pod_cgroup.h"

namespace gpuleak::monitor {

namespace {

// Reads a symbolic link; empty on failure.
std::string read_link(const std::string& path) {
  char target[4096];
  ssize_t length = readlink(path.c_str(), target, sizeof target);
  if (length <= 0) return {};
  return std::string(target, static_cast<std::size_t>(length));
}

// "pid:[4026531836]" -> 4026531836.
std::uint64_t namespace_inode(const std::string& link) {
  std::size_t open = link.find('[');
  if (open == std::string::npos) return 0;
  return std::strtoull(link.c_str() + open + 1, nullptr, 10);
}

std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\0', at);
    if (end == std::string::npos) end = text.size();
    parts.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  // Programs that rewrite their title leave trailing empty strings.
  while (!parts.empty() && parts.back().empty()) parts.pop_back();
  return parts;
}

// The fd directory of some live thread of `pid`, seen through /proc/PID/task.
std::string live_thread_fd_dir(int pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::string fallback = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(tasks.c_str());
  if (!dir) return fallback;
  std::string chosen = fallback;
  while (const dirent* entry = readdir(dir)) {
    if (!is_pid_entry(entry->d_name) || std::atoi(entry->d_name) == pid) continue;
    chosen = tasks + "/" + entry->d_name + "/fd";
    break;
  }
  closedir(dir);
  return chosen;
}

}  // namespace

bool read_proc_file(const std::string& path, std::string& out) {
  out.clear();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[4096];
  for (;;) {
    ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return false;
    }
    if (got == 0) break;
    out.append(buffer, static_cast<std::size_t>(got));
  }
  close(fd);
  return true;
}

std::string hidden_processes_note(const std::string& mountinfo_text, bool running_as_root) {
  if (running_as_root) return {};
  std::size_t at = 0;
  while (at < mountinfo_text.size()) {
    std::size_t end = mountinfo_text.find('\n', at);
    if (end == std::string::npos) end = mountinfo_text.size();
    std::string line = mountinfo_text.substr(at, end - at);
    at = end + 1;
    // Fields: id parent major:minor root mount-point options ... - type source super-options
    std::istringstream fields(line);
    std::string id, parent, device, root, mount_point;
    fields >> id >> parent >> device >> root >> mount_point;
    if (mount_point != "/proc") continue;
    std::size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::string super_options = line.substr(dash);
    bool hides = super_options.find("hidepid=1") != std::string::npos ||
                 super_options.find("hidepid=2") != std::string::npos ||
                 super_options.find("hidepid=invisible") != std::string::npos ||
                 super_options.find("hidepid=noaccess") != std::string::npos;
    if (hides) {
      return "/proc is mounted with hidepid, so other users' processes are hidden from gpuleak "
             "(run as root, or as a member of the group given by gid=, to see them)";
    }
  }
  return {};
}

const ProcessInfo* ProcessTable::find(int pid) const {
  auto it = processes.find(pid);
  return it == processes.end() ? nullptr : &it->second;
}

ProcScanner::ProcScanner(DeviceFilePattern pattern, double young_process_s)
    : pattern_(std::move(pattern)),
      page_size_bytes_(sysconf(_SC_PAGESIZE)),
      young_process_s_(young_process_s),
      ticks_per_s_(static_cast<double>(sysconf(_SC_CLK_TCK))) {}

bool ProcScanner::is_young(const ProcessInfo& info, double uptime_s) const {
  return uptime_s - static_cast<double>(info.start_ticks) / ticks_per_s_ < young_process_s_;
}

void ProcScanner::read_details(ProcessInfo& info) const {
  const std::string base = "/proc/" + std::to_string(info.pid) + "/";
  std::string text;
  if (read_proc_file(base + "status", text)) {
    info.uid = parse_real_uid(text);
    info.namespace_pid = parse_innermost_namespace_pid(text);
  }
  if (read_proc_file(base + "cmdline", text)) info.argv = split_nul(text);
  if (read_proc_file(base + "cgroup", text)) {
    info.container_id = container_id_from_cgroup(text);
    info.pod_uid = pod_uid_from_cgroup(text);
  }
  info.pid_namespace = namespace_inode(read_link(base + "ns/pid"));
  info.details_read = true;
}

void ProcScanner::read_handles(ProcessInfo& info) const {
  info.device_files.clear();
  info.device_handle_count = 0;
  std::string fd_dir = "/proc/" + std::to_string(info.pid) + "/fd";
  if (info.is_zombie() && info.threads > 1) {
    // A leader thread that exited while other threads run shows as a zombie
    // with an empty fd list; the live threads still share its files.
    fd_dir = live_thread_fd_dir(info.pid);
  }
  DIR* dir = opendir(fd_dir.c_str());
  if (!dir) {
    info.handle_scan =
        (errno == EACCES || errno == EPERM) ? HandleScan::kDenied : HandleScan::kGone;
    return;
  }
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::string target = read_link(fd_dir + "/" + entry->d_name);
    if (target.empty() || !pattern_.matches(target)) continue;
    ++info.device_handle_count;
    info.device_files.push_back(std::move(target));
  }
  closedir(dir);
  std::sort(info.device_files.begin(), info.device_files.end());
  info.device_files.erase(std::unique(info.device_files.begin(), info.device_files.end()),
                          info.device_files.end());
  info.handle_scan = HandleScan::kScanned;
}

std::set<int> ProcScanner::fresh_pids(const std::set<int>& watch_pids, double uptime_s) const {
  std::set<int> base = watch_pids;
  for (const auto& [pid, info] : cache_) {
    if (info.holds_device_handles()) base.insert(pid);
  }
  std::set<int> fresh = base;
  for (int pid : base) {
    auto it = cache_.find(pid);
    if (it == cache_.end()) continue;
    fresh.insert(it->second.ppid);
    fresh.insert(it->second.pgid);
  }
  for (const auto& [pid, info] : cache_) {
    if (base.count(info.ppid)) fresh.insert(pid);  // children: workers, zombies
    if (is_young(info, uptime_s)) fresh.insert(pid);
  }
  return fresh;
}

namespace {

double system_uptime_s() {
  std::string text;
  return read_proc_file("/proc/uptime", text) ? std::strtod(text.c_str(), nullptr) : 0.0;
}

}  // namespace

ProcessTable ProcScanner::scan(HandleScope scope, const std::set<int>& watch_pids) {
  ProcessTable table;
  table.own_pid_namespace = namespace_inode(read_link("/proc/self/ns/pid"));
  const bool full = scope == HandleScope::kAll;
  const double uptime_s = system_uptime_s();
  const std::set<int> fresh = full ? std::set<int>{} : fresh_pids(watch_pids, uptime_s);
  std::unordered_map<int, ProcessInfo> next_cache;

  DIR* proc = opendir("/proc");
  if (!proc) return table;
  std::string line;
  while (const dirent* entry = readdir(proc)) {
    if (!is_pid_entry(entry->d_name)) continue;
    const int pid = std::atoi(entry->d_name);
    auto cached = cache_.find(pid);
    const bool known = cached != cache_.end();
    if (!full && known && !fresh.count(pid)) {
      // Carried over: nothing this process does matters until the next full scan.
      next_cache.emplace(pid, cached->second);
      continue;
    }
    ProcessInfo info;
    if (!read_proc_file(std::string("/proc/") + entry->d_name + "/stat", line)) continue;
    if (!parse_proc_stat(line, page_size_bytes_, info)) continue;

    const bool same_process = known && cached->second.start_ticks == info.start_ticks;
    const ProcessInfo* before = same_process ? &cached->second : nullptr;
    // exec() keeps pid and start time but changes the name and command line.
    if (before && before->comm == info.comm && !full) {
      info.details_read = before->details_read;
      info.uid = before->uid;
      info.argv = before->argv;
      info.container_id = before->container_id;
      info.pod_uid = before->pod_uid;
      info.pid_namespace = before->pid_namespace;
      info.namespace_pid = before->namespace_pid;
    } else if (!info.kernel_thread) {
      read_details(info);
    }
    if (!info.kernel_thread) {
      bool young = is_young(info, uptime_s);
      bool watched_without_files =
          watch_pids.count(pid) && before && !before->holds_device_handles();
      if (full || !before || young || watched_without_files) {
        read_handles(info);
      } else {
        info.handle_scan = before->handle_scan;
        info.device_files = before->device_files;
        info.device_handle_count = before->device_handle_count;
      }
    }
    next_cache.emplace(pid, std::move(info));
  }
  closedir(proc);
  cache_ = std::move(next_cache);
  for (const auto& [pid, info] : cache_) {
    if (info.handle_scan == HandleScan::kDenied) {
      ++table.handle_scans_denied;
      if (info.uid) table.denied_owners.insert(*info.uid);
    }
    table.processes.emplace(pid, info);
  }
  return table;
}

bool is_pid_entry(const char* name) {
  if (!*name) return false;
  for (const char* c = name; *c; ++c) {
    if (*c < '0' || *c > '9') return false;
  }
  return true;
}

}  // namespace gpuleak::monitor
