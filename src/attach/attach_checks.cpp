#include "attach/attach_checks.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <sstream>
#include <vector>

#include "attach/attach.h"
#include "attach/elf_symbols.h"

namespace gpuleak::attach {

namespace {

constexpr int kCapSysPtrace = 19;  // linux/capability.h

struct ProcessStatus {
  bool found = false;
  std::string name;
  char state = '?';
  std::vector<long> uids;  // real, effective, saved, filesystem
  int tracer_pid = 0;
  int parent_pid = 0;
  unsigned long long effective_caps = 0;
};

ProcessStatus read_status(const std::string& pid) {
  ProcessStatus status;
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line)) {
    status.found = true;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::istringstream value(line.substr(colon + 1));
    if (key == "Name") {
      value >> status.name;
    } else if (key == "State") {
      value >> status.state;
    } else if (key == "Uid") {
      long uid = 0;
      while (value >> uid) status.uids.push_back(uid);
    } else if (key == "TracerPid") {
      value >> status.tracer_pid;
    } else if (key == "PPid") {
      value >> status.parent_pid;
    } else if (key == "CapEff") {
      value >> std::hex >> status.effective_caps;
    }
  }
  return status;
}

int yama_scope() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int scope = -1;
  if (!(in >> scope)) return -1;
  return scope;
}

bool is_descendant_of_us(int pid) {
  int self = static_cast<int>(::getpid());
  for (int at = pid, hops = 0; at > 1 && hops < 4096; ++hops) {
    ProcessStatus s = read_status(std::to_string(at));
    if (!s.found) return false;
    if (s.parent_pid == self) return true;
    at = s.parent_pid;
  }
  return false;
}

std::string read_link(const std::string& path, int* error) {
  std::vector<char> buffer(PATH_MAX + 1);
  ssize_t n = ::readlink(path.c_str(), buffer.data(), PATH_MAX);
  *error = n < 0 ? errno : 0;
  return n < 0 ? "" : std::string(buffer.data(), static_cast<std::size_t>(n));
}

}  // namespace

std::string yama_refusal(int scope, bool may_trace_any, bool target_is_descendant) {
  switch (scope) {
    case 1:
      if (may_trace_any || target_is_descendant) return "";
      return "Yama's ptrace_scope is 1 (/proc/sys/kernel/yama/ptrace_scope): only a process's "
             "ancestors may trace it; run gpuleak attach as root (or with CAP_SYS_PTRACE), or "
             "allow it with `sysctl kernel.yama.ptrace_scope=0`";
    case 2:
      if (may_trace_any) return "";
      return "Yama's ptrace_scope is 2 (/proc/sys/kernel/yama/ptrace_scope): only root (or "
             "CAP_SYS_PTRACE) may trace processes; run gpuleak attach as root";
    case 3:
      return "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope): no process may be "
             "traced on this machine until it reboots; start the job under `gpuleak run` instead";
    default:
      return "";
  }
}

std::string why_not_attachable(int pid) {
#if !defined(__x86_64__)
  (void)pid;
  return "gpuleak attach supports x86-64 Linux only";
#else
  std::string id = std::to_string(pid);
  if (pid <= 0) return "no process " + id;
  if (pid == static_cast<int>(::getpid())) return "PID " + id + " is gpuleak itself";
  ProcessStatus target = read_status(id);
  if (!target.found) return "no process " + id;
  std::string who = "PID " + id + " (" + target.name + ")";
  int link_error = 0;
  std::string exe = read_link("/proc/" + id + "/exe", &link_error);
  if (exe.empty() && link_error == ENOENT) return who + " is a kernel thread, not a program";
  if (target.state == 'Z' || target.state == 'X') return who + " has exited (a zombie)";
  if (target.state == 'T' || target.state == 't')
    return who + " is stopped (state " + std::string(1, target.state) +
           "); continue it first (kill -CONT " + id + ")";
  ProcessStatus self = read_status("self");
  bool root = ::geteuid() == 0;
  bool may_trace_any = (self.effective_caps >> kCapSysPtrace) & 1U;
  if (!root && !may_trace_any) {
    for (std::size_t i = 0; i < target.uids.size() && i < 3; ++i) {  // real, effective, saved
      long uid = target.uids[i];
      if (uid != static_cast<long>(::getuid()) || uid != static_cast<long>(::geteuid()))
        return who + " belongs to another user (uid " +
               std::to_string(target.uids.empty() ? -1 : target.uids[0]) +
               "); gpuleak attach joins processes of its own user, or any as root";
    }
  }
  if (target.tracer_pid != 0) {
    ProcessStatus tracer = read_status(std::to_string(target.tracer_pid));
    return who + " is already traced by PID " + std::to_string(target.tracer_pid) + " (" +
           tracer.name +
           "), a debugger or profiler; a process has one tracer at a time: detach that first";
  }
  std::string yama = yama_refusal(yama_scope(), may_trace_any, is_descendant_of_us(pid));
  if (!yama.empty()) return yama;
  if (exe.empty())
    return "cannot read " + who + "'s executable (/proc/" + id +
           "/exe): gpuleak may not look into it (another user, or PR_SET_DUMPABLE 0)";
  std::string seen = "/proc/" + id + "/exe";
  if (::access(seen.c_str(), R_OK) == 0 && !is_x86_64_elf(seen))
    return who + " is not an x86-64 program; gpuleak attach supports x86-64 Linux only";
  return "";
#endif
}

}  // namespace gpuleak::attach
