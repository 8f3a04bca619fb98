#include "monitor/process_ender.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "monitor/proc_scanner.h"
#include "monitor/process_info.h"

namespace gpuleak::monitor {

namespace {

#ifndef SYS_pidfd_open
constexpr long kSysPidfdOpen = 434;
#else
constexpr long kSysPidfdOpen = SYS_pidfd_open;
#endif
#ifndef SYS_pidfd_send_signal
constexpr long kSysPidfdSendSignal = 424;
#else
constexpr long kSysPidfdSendSignal = SYS_pidfd_send_signal;
#endif

// Reads the start time and state of `pid`; false when it no longer exists.
bool read_identity(int pid, std::uint64_t& start_ticks, char& state) {
  std::string line;
  ProcessInfo info;
  if (!read_proc_file("/proc/" + std::to_string(pid) + "/stat", line) ||
      !parse_proc_stat(line, sysconf(_SC_PAGESIZE), info)) {
    return false;
  }
  start_ticks = info.start_ticks;
  state = info.state;
  return true;
}

class PinnedProcess {
 public:
  explicit PinnedProcess(int pid) : pid_(pid) {
    long fd = syscall(kSysPidfdOpen, pid, 0);
    if (fd >= 0) {
      pidfd_ = static_cast<int>(fd);
    } else {
      open_errno_ = errno;
    }
  }
  ~PinnedProcess() {
    if (pidfd_ >= 0) close(pidfd_);
  }
  PinnedProcess(const PinnedProcess&) = delete;
  PinnedProcess& operator=(const PinnedProcess&) = delete;

  bool gone_before_pinning() const { return pidfd_ < 0 && open_errno_ == ESRCH; }

  // 0 or an errno.
  int send(int signal) const {
    long rc =
        pidfd_ >= 0 ? syscall(kSysPidfdSendSignal, pidfd_, signal, nullptr, 0) : kill(pid_, signal);
    return rc == 0 ? 0 : errno;
  }

  // True when the process exited within `seconds`.
  bool wait_for_exit(double seconds) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      if (exited()) return true;
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return false;
      int wait_ms =
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()) + 1;
      if (pidfd_ >= 0) {
        pollfd entry{pidfd_, POLLIN, 0};
        poll(&entry, 1, wait_ms);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(wait_ms, 50)));
      }
    }
  }

 private:
  bool exited() const {
    if (pidfd_ >= 0) {
      pollfd entry{pidfd_, POLLIN, 0};
      return poll(&entry, 1, 0) > 0;
    }
    std::uint64_t start = 0;
    char state = '?';
    return !read_identity(pid_, start, state) || state == 'Z' || state == 'X';
  }

  int pid_;
  int pidfd_ = -1;
  int open_errno_ = 0;
};

}  // namespace

const char* end_result_name(EndResult result) {
  switch (result) {
    case EndResult::kEndedBySigterm:
      return "ended_by_sigterm";
    case EndResult::kEndedBySigkill:
      return "ended_by_sigkill";
    case EndResult::kAlreadyGone:
      return "already_gone";
    case EndResult::kReplaced:
      return "pid_reused";
    case EndResult::kStillRunning:
      return "still_running";
    case EndResult::kFailed:
      return "failed";
  }
  return "failed";
}

EndOutcome end_process(const EndTarget& target, double grace_s, const EndLog& log) {
  EndOutcome outcome;
  outcome.pid = target.pid;
  auto finish = [&](EndResult result, std::string message) {
    outcome.result = result;
    outcome.message = std::move(message);
    return outcome;
  };
  PinnedProcess process(target.pid);
  if (process.gone_before_pinning()) {
    return finish(EndResult::kAlreadyGone,
                  fmt::format("PID {} had already exited; nothing sent", target.pid));
  }
  std::uint64_t start_ticks = 0;
  char state = '?';
  if (!read_identity(target.pid, start_ticks, state)) {
    return finish(EndResult::kAlreadyGone,
                  fmt::format("PID {} had already exited; nothing sent", target.pid));
  }
  if (start_ticks != target.start_ticks) {
    return finish(EndResult::kReplaced,
                  fmt::format("PID {} now names a different process; nothing sent", target.pid));
  }

  log(fmt::format("sending SIGTERM to PID {} ({})", target.pid, target.description));
  if (int error = process.send(SIGTERM); error != 0) {
    if (error == ESRCH) {
      return finish(EndResult::kAlreadyGone, fmt::format("PID {} exited", target.pid));
    }
    return finish(EndResult::kFailed,
                  fmt::format("could not signal PID {}: {}", target.pid, std::strerror(error)));
  }
  if (process.wait_for_exit(grace_s)) {
    return finish(EndResult::kEndedBySigterm,
                  fmt::format("PID {} exited after SIGTERM", target.pid));
  }
  log(fmt::format("PID {} still runs after {:.1f} s; sending SIGKILL", target.pid, grace_s));
  if (int error = process.send(SIGKILL); error != 0 && error != ESRCH) {
    return finish(EndResult::kFailed, fmt::format("could not send SIGKILL to PID {}: {}",
                                                  target.pid, std::strerror(error)));
  }
  if (process.wait_for_exit(kKillWaitSeconds)) {
    return finish(EndResult::kEndedBySigkill,
                  fmt::format("PID {} was ended with SIGKILL", target.pid));
  }
  return finish(EndResult::kStillRunning,
                fmt::format("PID {} survived SIGKILL for {:.0f} s (stuck in the kernel?)",
                            target.pid, kKillWaitSeconds));
}

}  // namespace gpuleak::monitor
