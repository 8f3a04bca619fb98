// Starts the traced program and waits for it, forwarding the signals a
// person or a scheduler sends to gpuleak (Ctrl-C from the terminal reaches
// the program directly, so terminal signals are not sent twice).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpuleak::cli {

class ChildProcess {
 public:
  // Starts `argv` with `environment` (KEY=VALUE strings). Throws InputError
  // when the program cannot be started (not found, not executable).
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& environment);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Non-blocking; returns the exit status once the program has ended:
  // its exit code, or 128 + signal number when a signal ended it.
  std::optional<int> poll();
  // Whether the program ended by exiting (so its atexit handlers ran), not
  // by a signal. Meaningful once poll() returned a status.
  bool exited() const { return exited_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  bool exited_ = false;
};

// Reports how the program ended, for people ("killed by SIGKILL").
std::string describe_exit_status(int status);

}  // namespace gpuleak::cli
