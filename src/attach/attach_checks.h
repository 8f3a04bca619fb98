// The checks made before a process is touched: each refusal is one
// sentence that says what to do.
#pragma once

#include <string>

namespace gpuleak::attach {

// What Yama's ptrace_scope (/proc/sys/kernel/yama/ptrace_scope) allows:
// "" when attaching is allowed, else why not. `scope` -1: no Yama.
std::string yama_refusal(int scope, bool may_trace_any, bool target_is_descendant);

// Where a process's user namespace is, seen from gpuleak's. The kernel lets
// a tracer join a process when the tracer has CAP_SYS_PTRACE in the
// process's user namespace (which root has only in its own namespace and
// those below it) or when both run with the same user and group ids.
enum class TargetUserNamespace {
  kSame,        // gpuleak's own
  kInside,      // one created below gpuleak's (a container gpuleak's user started)
  kOutside,     // neither: gpuleak runs in a user namespace of its own (rootless container)
  kUnreadable,  // /proc/PID/ns/user may not be read: the kernel denies even a look
};

struct UserNamespaces {
  bool gpuleak_in_initial = true;  // /proc/self/uid_map maps every uid to itself
  long gpuleak_uid_outside = -1;   // gpuleak's uid as the machine sees it (-1: unknown)
  TargetUserNamespace target = TargetUserNamespace::kSame;
  bool same_ids = false;  // the process's real, effective and saved uids and gids are gpuleak's
};

// "" when the user namespaces allow the attach, else why not and what to
// do. `who` names the process ("PID 42 (python3)").
std::string user_namespace_refusal(const UserNamespaces& namespaces, const std::string& who);

}  // namespace gpuleak::attach
