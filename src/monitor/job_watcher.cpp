#include "monitor/job_watcher.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>

#include "monitor/nvml_library.h"
#include "monitor/proc_scanner.h"
#include "monitor/process_info.h"

namespace gpuleak::monitor {

namespace {

std::vector<int> list_pids() {
  std::vector<int> pids;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (const dirent* entry = readdir(proc)) {
    if (is_pid_entry(entry->d_name)) pids.push_back(std::atoi(entry->d_name));
  }
  closedir(proc);
  return pids;
}

std::vector<std::string> read_argv(int pid) {
  std::string text;
  std::vector<std::string> argv;
  if (!read_proc_file("/proc/" + std::to_string(pid) + "/cmdline", text)) return argv;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\0', at);
    if (end == std::string::npos) end = text.size();
    argv.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  while (!argv.empty() && argv.back().empty()) argv.pop_back();
  return argv;
}

}  // namespace

JobWatcher::JobWatcher(int main_pid, const NvmlLibrary* nvml)
    : nvml_(nvml), page_size_bytes_(sysconf(_SC_PAGESIZE)) {
  adopted_.insert(main_pid);
}

void JobWatcher::adopt(int pid) {
  if (pid <= 0 || members_.count(pid)) return;
  adopted_.insert(pid);
  strangers_.erase(pid);
}

analysis::ProcessSample JobWatcher::sample(std::uint64_t time_ns,
                                           std::vector<analysis::ObservedProcess>* joined) {
  analysis::ProcessSample sample;
  sample.time_ns = time_ns;
  for (auto& [pid, member] : members_) member.alive = false;

  // Stat lines of every process that is a member or not yet known.
  std::map<int, ProcessInfo> candidates;
  std::string line;
  // Strangers are read again now and then, so a pid reused by a new child of
  // the job is found (a traced one is adopted at once).
  bool recheck_strangers = samples_++ % kStrangerRecheckEvery == 0;
  for (int pid : list_pids()) {
    auto stranger = strangers_.find(pid);
    bool member = members_.count(pid) > 0;
    if (!member && stranger != strangers_.end() && !adopted_.count(pid) && !recheck_strangers)
      continue;
    ProcessInfo info;
    if (!read_proc_file("/proc/" + std::to_string(pid) + "/stat", line) ||
        !parse_proc_stat(line, page_size_bytes_, info))
      continue;
    if (!member && stranger != strangers_.end() && stranger->second == info.start_ticks &&
        !adopted_.count(pid))
      continue;  // the same stranger as before
    if (member && members_[pid].start_ticks != info.start_ticks) {
      members_.erase(pid);  // the pid was reused: the member is gone, this is someone else
    }
    candidates.emplace(pid, std::move(info));
  }

  // Members first, then whoever descends from a member or was adopted, to a
  // fixed point (a child and its parent may both be new).
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto it = candidates.begin(); it != candidates.end();) {
      int pid = it->first;
      const ProcessInfo& info = it->second;
      auto member = members_.find(pid);
      bool joins = member == members_.end() &&
                   (adopted_.count(pid) || (members_.count(info.ppid) && info.ppid != 0));
      if (member == members_.end() && !joins) {
        ++it;
        continue;
      }
      if (joins) {
        Member m;
        m.start_ticks = info.start_ticks;
        m.parent_pid = info.ppid;
        members_[pid] = m;
        adopted_.erase(pid);
        changed = true;
      }
      Member& m = members_[pid];
      std::vector<std::string> argv = read_argv(pid);
      if (m.comm != info.comm || (m.argv != argv && !argv.empty())) {
        // New to the job, or it exec'd: its name and command line are news.
        m.comm = info.comm;
        m.argv = argv;
        if (joined) {
          analysis::ObservedProcess p;
          p.pid = pid;
          p.start_ticks = info.start_ticks;
          p.parent_pid = info.ppid;
          p.comm = info.comm;
          p.argv = argv;
          p.first_seen_ns = time_ns;
          joined->push_back(std::move(p));
        }
      }
      m.alive = true;
      m.state = info.state;
      m.parent_pid = info.ppid;
      sample.alive.push_back({pid, info.state, info.ppid});
      it = candidates.erase(it);
    }
  }
  for (const auto& [pid, info] : candidates) {
    if (!adopted_.count(pid)) strangers_[pid] = info.start_ticks;
  }
  // Strangers that are gone free their entry (their pid may come back as a member).
  if (strangers_.size() > 4 * (candidates.size() + members_.size()) + 1024) {
    std::set<int> present;
    for (int pid : list_pids()) present.insert(pid);
    for (auto it = strangers_.begin(); it != strangers_.end();) {
      it = present.count(it->first) ? std::next(it) : strangers_.erase(it);
    }
  }

  if (nvml_ && nvml_->available()) {
    GpuReadResult read = nvml_->read_devices();
    for (const GpuDevice& device : read.devices) {
      sample.devices.push_back(
          {static_cast<int>(device.index), device.memory_used_bytes, device.memory_total_bytes});
      for (const GpuProcessUsage& use : device.processes) {
        auto member = members_.find(use.pid);
        if (member != members_.end() && member->second.alive) {
          sample.gpu.push_back({use.pid, static_cast<int>(device.index), use.memory_bytes});
        } else {
          sample.other_gpu_pids.push_back(use.pid);
        }
      }
    }
  }
  return sample;
}

std::vector<int> JobWatcher::running() const {
  std::vector<int> out;
  for (const auto& [pid, member] : members_) {
    if (member.alive && member.state != 'Z') out.push_back(pid);
  }
  return out;
}

}  // namespace gpuleak::monitor
