#include "monitor/kill_policy.h"

#include <fmt/format.h>
#include <unistd.h>

#include "monitor/proc_scanner.h"

namespace gpuleak::monitor {

KillContext KillContext::for_this_process(bool all_users) {
  KillContext context;
  context.caller_uid = getuid();
  context.caller_pid = static_cast<int>(getpid());
  context.caller_ancestors = monitor::caller_ancestors();
  context.all_users = all_users;
  return context;
}

std::set<int> caller_ancestors() {
  std::set<int> chain;
  const long page_size = sysconf(_SC_PAGESIZE);
  int pid = static_cast<int>(getppid());
  std::string line;
  while (pid > 0 && chain.size() < 4096 && chain.insert(pid).second) {
    ProcessInfo info;
    if (!read_proc_file("/proc/" + std::to_string(pid) + "/stat", line) ||
        !parse_proc_stat(line, page_size, info)) {
      break;
    }
    pid = info.ppid;
  }
  return chain;
}

KillDecision decide_kill(const ProcessInfo& target, bool diagnosed_orphan,
                         bool target_is_namespace_init, const KillContext& context,
                         const std::string& target_user) {
  auto refuse = [](std::string reason) { return KillDecision{false, std::move(reason)}; };
  if (target.pid <= 1) return refuse("PID 1 (init) is never signalled");
  if (target_is_namespace_init) return refuse("it is the init process of a container");
  if (target.kernel_thread) return refuse("it is a kernel thread");
  if (target.pid == context.caller_pid) return refuse("it is gpuleak itself");
  if (context.caller_ancestors.count(target.pid)) {
    return refuse("it is an ancestor of gpuleak (the shell or session that started it)");
  }
  if (target.is_zombie()) {
    return refuse("it has already exited (a zombie); only its parent can reap it");
  }
  if (!diagnosed_orphan) return refuse("it is not an orphan; only orphaned processes are ended");
  if (!target.uid) return refuse("its owner cannot be read");
  if (*target.uid != context.caller_uid) {
    if (context.caller_uid != 0) {
      return refuse(fmt::format("it belongs to {}, not to you", target_user));
    }
    if (!context.all_users) {
      return refuse(
          fmt::format("it belongs to {}; as root, pass --all-users to end other users' processes",
                      target_user));
    }
  }
  return KillDecision{true, {}};
}

}  // namespace gpuleak::monitor
