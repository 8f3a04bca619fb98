// The terminal of an interactive command (`gpuleak top`): keys one at a
// time without echo, on the alternate screen with the cursor hidden, and
// everything put back as it was (the shell's screen comes back) by the
// destructor, by suspend() (before a child program takes the terminal) and
// by restore_terminal_now() (from a signal handler or std::terminate).
// Ctrl-C still raises SIGINT.
//
// One RawTerminal at a time per process; not thread-safe.
#pragma once

#include <termios.h>

#include <string>

namespace gpuleak::cli {

enum class KeyKind { kNone, kChar, kUp, kDown, kEnter, kEscape, kBackspace };

struct Key {
  KeyKind kind = KeyKind::kNone;
  char ch = 0;  // for kChar
};

class RawTerminal {
 public:
  // Puts `fd` (a terminal) into raw mode. Throws InputError when it cannot.
  explicit RawTerminal(int fd);
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

  void suspend();  // the terminal as it was, cursor shown
  void resume();   // raw again, on the alternate screen
  // Raw keys on the normal screen, so what a child program printed there
  // stays in view while the user reads it; resume() then goes back.
  void keys_on_normal_screen();

  // Waits up to timeout_ms for a key; kNone on timeout or a signal.
  Key read_key(int timeout_ms);

 private:
  int fd_;
  std::string pending_;
};

// Async-signal-safe: puts the terminal saved by the live RawTerminal back.
void restore_terminal_now();

}  // namespace gpuleak::cli
