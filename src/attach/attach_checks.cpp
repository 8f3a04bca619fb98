#include "attach/attach_checks.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
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
  std::vector<long> gids;  // the same four
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
    } else if (key == "Gid") {
      long gid = 0;
      while (value >> gid) status.gids.push_back(gid);
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

// The kernel's rule for a tracer without the capability: the process's
// real, effective and saved ids are the tracer's real ones (as /proc shows
// them in gpuleak's namespace; an id unmapped there reads as 65534).
bool same_ids(const ProcessStatus& target) {
  if (target.uids.size() < 3 || target.gids.size() < 3) return false;
  for (std::size_t i = 0; i < 3; ++i) {
    if (target.uids[i] != static_cast<long>(::getuid())) return false;
    if (target.gids[i] != static_cast<long>(::getgid())) return false;
  }
  return true;
}

// From /proc/self/uid_map: whether it is the initial namespace's identity
// map, and gpuleak's uid outside.
void read_own_uid_map(UserNamespaces* namespaces) {
  std::ifstream in("/proc/self/uid_map");
  long inside = 0, outside = 0, count = 0;
  int lines = 0;
  bool identity = false;
  long uid = static_cast<long>(::getuid());
  while (in >> inside >> outside >> count) {
    ++lines;
    identity = inside == 0 && outside == 0 && count == 4294967295L;
    if (uid >= inside && uid - inside < count)
      namespaces->gpuleak_uid_outside = outside + (uid - inside);
  }
  namespaces->gpuleak_in_initial = lines == 0 || (lines == 1 && identity);
}

// Walks up from the process's user namespace (NS_GET_PARENT, Linux 4.9+)
// until gpuleak's: found, it is inside; the kernel refusing to go further
// up (the parent is outside gpuleak's namespace) means it is outside.
TargetUserNamespace locate_user_namespace(const std::string& pid) {
  struct stat own {};
  if (::stat("/proc/self/ns/user", &own) != 0) return TargetUserNamespace::kSame;
  int fd = ::open(("/proc/" + pid + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == EACCES || errno == EPERM ? TargetUserNamespace::kUnreadable
                                             : TargetUserNamespace::kSame;
  }
  TargetUserNamespace where = TargetUserNamespace::kOutside;
  for (int depth = 0; depth < 64; ++depth) {  // the kernel nests at most 32
    struct stat at {};
    if (::fstat(fd, &at) != 0) break;
    if (at.st_ino == own.st_ino && at.st_dev == own.st_dev) {
      where = depth == 0 ? TargetUserNamespace::kSame : TargetUserNamespace::kInside;
      break;
    }
    int parent = ::ioctl(fd, NS_GET_PARENT);
    if (parent < 0) {
      // ENOTTY: a kernel older than 4.9 cannot tell; let ptrace decide.
      if (errno == ENOTTY || errno == EINVAL) where = TargetUserNamespace::kSame;
      break;
    }
    ::close(fd);
    fd = parent;
  }
  ::close(fd);
  return where;
}

std::string read_link(const std::string& path, int* error) {
  std::vector<char> buffer(PATH_MAX + 1);
  ssize_t n = ::readlink(path.c_str(), buffer.data(), PATH_MAX);
  *error = n < 0 ? errno : 0;
  return n < 0 ? "" : std::string(buffer.data(), static_cast<std::size_t>(n));
}

}  // namespace

std::string user_namespace_refusal(const UserNamespaces& namespaces, const std::string& who) {
  bool outside = namespaces.target == TargetUserNamespace::kOutside;
  bool unreadable = namespaces.target == TargetUserNamespace::kUnreadable;
  if (!(outside && !namespaces.same_ids) && !(unreadable && !namespaces.gpuleak_in_initial))
    return "";
  std::string own =
      namespaces.gpuleak_in_initial
          ? std::string()
          : " gpuleak runs in a user namespace of its own (a rootless container" +
                (namespaces.gpuleak_uid_outside >= 0
                     ? "; it is uid " + std::to_string(namespaces.gpuleak_uid_outside) +
                           " outside, /proc/self/uid_map"
                     : std::string()) +
                "), and root there has no rights over processes outside it.";
  std::string where = outside ? who + " lives outside gpuleak's user namespace (/proc/PID/ns/user)"
                              : who + " may not even be looked at from gpuleak's user namespace";
  return where + " and runs as another user, so the kernel would refuse to let gpuleak trace it." +
         own +
         " Run gpuleak attach where the process is: inside its container (docker exec, "
         "kubectl exec), or outside as its user or root";
}

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
  UserNamespaces namespaces;
  read_own_uid_map(&namespaces);
  namespaces.target = locate_user_namespace(id);
  namespaces.same_ids = same_ids(target);
  std::string foreign = user_namespace_refusal(namespaces, who);
  if (!foreign.empty()) return foreign;
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
           "/exe): gpuleak may not look into it (another user, another user namespace, or "
           "PR_SET_DUMPABLE 0)";
  std::string seen = "/proc/" + id + "/exe";
  if (::access(seen.c_str(), R_OK) == 0 && !is_x86_64_elf(seen))
    return who + " is not an x86-64 program; gpuleak attach supports x86-64 Linux only";
  return "";
#endif
}

}  // namespace gpuleak::attach
