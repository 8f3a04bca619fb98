// The terminal comes back when an interactive command dies by a signal.
//
// While a TerminalSignals lives, SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT
// (a crash, a failed assertion, std::terminate) and SIGTERM and SIGHUP (kill,
// a closed terminal window) first put the terminal back as the live
// RawTerminal found it (restore_terminal_now), then kill the process with the
// signal's default action, so the parent sees the real cause (a shell: status
// 128 + the signal's number; a crash still dumps core where it would). A child
// named by forward_ending_signals_to() gets SIGTERM and SIGHUP first: `gpuleak
// attach` run from `top` detaches cleanly instead of being left behind.
//
// SIGKILL cannot be caught: after `kill -9` the terminal stays raw and the
// user types `reset` (docs/monitor.md).
//
// The handlers make only async-signal-safe calls (tcsetattr, write, kill,
// sigaction, alarm, raise) on an alternate signal stack, so a crash by stack
// overflow is handled too. A terminal that takes no output cannot hold top:
// after 2 s of a blocked restore, SIGALRM ends it. One TerminalSignals at a time per process;
// create it before the RawTerminal and destroy it after (the handlers must outlive the raw mode).
// Not thread-safe.
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace gpuleak::cli {

class TerminalSignals {
 public:
  TerminalSignals();   // installs the handlers
  ~TerminalSignals();  // puts the previous handlers back
  TerminalSignals(const TerminalSignals&) = delete;
  TerminalSignals& operator=(const TerminalSignals&) = delete;

 private:
  static constexpr int kCount = 7;
  struct sigaction previous_[kCount] {};
  stack_t previous_stack_{};
};

// The child that gets SIGTERM and SIGHUP before this process dies of them;
// 0: none.
void forward_ending_signals_to(pid_t child);

}  // namespace gpuleak::cli
