// Ends one process: SIGTERM, a grace period, then SIGKILL.
//
// The target is pinned with a pidfd before anything is sent and its start
// time is checked again, so a pid that was reused since the scan (a
// different process) is never signalled. Every signal sent is reported to
// the log callback as a full sentence before it is sent. Waiting uses the
// pidfd (readable when the process exits), so it returns as soon as the
// process is gone. Blocks for at most grace + kKillWaitSeconds.
//
// Thread-safe (no shared state); the callback is called on the calling thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace gpuleak::monitor {

inline constexpr double kKillWaitSeconds = 5.0;

enum class EndResult {
  kEndedBySigterm,  // exited within the grace period
  kEndedBySigkill,  // needed SIGKILL
  kAlreadyGone,     // had exited before anything was sent
  kReplaced,        // the pid now names a different process: nothing sent
  kStillRunning,    // survived SIGKILL for kKillWaitSeconds (stuck in the kernel, state D)
  kFailed,          // a signal could not be sent (permission)
};

struct EndOutcome {
  int pid = 0;
  EndResult result = EndResult::kFailed;
  std::string message;  // one sentence for people and the JSON log
};

struct EndTarget {
  int pid = 0;
  std::uint64_t start_ticks = 0;  // from the scan; must still match
  std::string description;        // "python3 worker.py, user alice"
};

using EndLog = std::function<void(const std::string&)>;

EndOutcome end_process(const EndTarget& target, double grace_s, const EndLog& log);

const char* end_result_name(EndResult result);

}  // namespace gpuleak::monitor
