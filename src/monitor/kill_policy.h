// Who `gpuleak doctor --kill-orphans` may end. The rules are checked here,
// in one place, right before any signal is sent:
//   * never PID 1, never a container's init, never a kernel thread;
//   * never gpuleak itself or any of its ancestors (the shell, sudo, ssh...);
//   * only processes the diagnosis called orphans (never a live parent, a
//     worker with a living parent, or anything else);
//   * never a zombie (it already exited; only its parent can reap it);
//   * only the caller's own processes; other users' only for root, and only
//     with an explicit --all-users.
//
// Pure functions except caller_ancestors(), which reads /proc. Thread-safe.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>

#include "monitor/process_info.h"

namespace gpuleak::monitor {

struct KillContext {
  uid_t caller_uid = 0;
  int caller_pid = 0;
  std::set<int> caller_ancestors;
  bool all_users = false;  // --all-users (only meaningful for root)

  // The context of this process: its real uid, pid and ancestors.
  static KillContext for_this_process(bool all_users);
};

struct KillDecision {
  bool allowed = false;
  std::string reason;  // why not, worded for a person; empty when allowed
};

KillDecision decide_kill(const ProcessInfo& target, bool diagnosed_orphan,
                         bool target_is_namespace_init, const KillContext& context,
                         const std::string& target_user);

// The chain of parents of this process, read from /proc (parent first).
std::set<int> caller_ancestors();

}  // namespace gpuleak::monitor
