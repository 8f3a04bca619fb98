// Runs a program as a real child process and captures what a user would
// see: its exit status, stdout and stderr. For tests that check behaviour at
// the process boundary (exit codes, one-line messages, files left behind).
//
// Not thread-safe; one call runs one child to its end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace gpuleak::testing {

struct ProcessOptions {
  std::vector<std::string> set_env;    // KEY=VALUE added to (or replacing in) our environment
  std::vector<std::string> unset_env;  // KEY removed from the child's environment
  std::string working_dir;             // empty: ours
  // A child still running after this is killed (SIGKILL) and `timed_out` is set:
  // a guard against hangs, not a performance check.
  std::chrono::seconds timeout{180};
  // Called with each complete stderr line as it arrives, while the child runs.
  std::function<void(const std::string& line)> on_stderr_line;
  // Called about every 20 ms while the child runs.
  std::function<void(pid_t pid)> while_running;
};

struct ProcessResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  long max_rss_kib = 0;  // the child's peak resident memory (wait4's ru_maxrss)
  std::string out;
  std::string err;
  // The non-empty lines of `err`.
  std::vector<std::string> err_lines() const;
  // "exit 3" / "signal 9" / "timed out", plus stderr, for failure messages.
  std::string describe() const;
};

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

}  // namespace gpuleak::testing
