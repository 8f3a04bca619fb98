// The checks made before a process is touched: each refusal is one
// sentence that says what to do.
#pragma once

#include <string>

namespace gpuleak::attach {

// What Yama's ptrace_scope (/proc/sys/kernel/yama/ptrace_scope) allows:
// "" when attaching is allowed, else why not. `scope` -1: no Yama.
std::string yama_refusal(int scope, bool may_trace_any, bool target_is_descendant);

}  // namespace gpuleak::attach
