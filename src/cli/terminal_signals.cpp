#include "terminal_signals.h"

#include <unistd.h>

#include <cerrno>

#include "raw_terminal.h"

namespace gpuleak::cli {

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGHUP};

volatile sig_atomic_t g_forward_to = 0;

// A stack overflow leaves no room on the thread's own stack for a handler.
alignas(16) char g_signal_stack[64 * 1024];

// A terminal that takes no output (its window frozen, its tmux server
// stopped) would block the restore for ever (tcsetattr waits for the output
// to drain, write for room): SIGALRM's default action ends top then.
constexpr unsigned kRestoreWatchdogS = 2;

void restore_then_die(int signal) {
  int saved_errno = errno;
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(SIGALRM, &fallback, nullptr);
  // The child first: a restore that blocks must not keep it from hearing.
  pid_t child = static_cast<pid_t>(g_forward_to);
  if ((signal == SIGTERM || signal == SIGHUP) && child > 0) ::kill(child, signal);
  ::alarm(kRestoreWatchdogS);
  restore_terminal_now();
  ::sigaction(signal, &fallback, nullptr);
  // The signal is blocked while its handler runs: raise() leaves it pending
  // and it is delivered, with the default action, as the handler returns (a
  // fault's instruction would also fault again, to the same end).
  ::raise(signal);
  errno = saved_errno;
}

}  // namespace

static_assert(sizeof kSignals / sizeof kSignals[0] == 7, "kCount is the number of kSignals");

TerminalSignals::TerminalSignals() {
  stack_t stack{};
  stack.ss_sp = g_signal_stack;
  stack.ss_size = sizeof g_signal_stack;
  ::sigaltstack(&stack, &previous_stack_);
  struct sigaction action {};
  action.sa_handler = restore_then_die;
  sigfillset(&action.sa_mask);          // one restore at a time, never interrupted...
  sigdelset(&action.sa_mask, SIGALRM);  // ...but by its watchdog
  action.sa_flags = SA_ONSTACK;
  for (int i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
}

TerminalSignals::~TerminalSignals() {
  for (int i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  ::sigaltstack(&previous_stack_, nullptr);
  g_forward_to = 0;
}

void forward_ending_signals_to(pid_t child) { g_forward_to = static_cast<sig_atomic_t>(child); }

}  // namespace gpuleak::cli
