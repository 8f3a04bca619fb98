#include "raw_terminal.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "command.h"

namespace gpuleak::cli {

namespace {

// Saved for restore_terminal_now(), which may run in a signal handler.
struct termios g_saved {};
volatile int g_saved_fd = -1;

// The alternate screen keeps the shell's screen as it was under the view.
constexpr char kLeaveScreen[] = "\x1b[?1049l\x1b[?25h";
constexpr char kEnterScreen[] = "\x1b[?1049h\x1b[?25l";

void write_all(int fd, const char* text, std::size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, text, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text += written;
    size -= static_cast<std::size_t>(written);
  }
}

void enter_raw(int fd, bool alternate_screen) {
  struct termios raw = g_saved;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | IEXTEN);
  raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(fd, TCSAFLUSH, &raw) != 0) {
    throw InputError(std::string("cannot set the terminal to raw mode: ") + std::strerror(errno));
  }
  if (alternate_screen) write_all(STDOUT_FILENO, kEnterScreen, sizeof kEnterScreen - 1);
}

}  // namespace

void restore_terminal_now() {
  int fd = g_saved_fd;
  if (fd < 0) return;
  tcsetattr(fd, TCSAFLUSH, &g_saved);
  write_all(STDOUT_FILENO, kLeaveScreen, sizeof kLeaveScreen - 1);
}

RawTerminal::RawTerminal(int fd) : fd_(fd) {
  if (tcgetattr(fd, &g_saved) != 0) {
    throw InputError(std::string("cannot read the terminal's settings: ") + std::strerror(errno));
  }
  g_saved_fd = fd;
  try {
    enter_raw(fd, true);
  } catch (...) {
    restore_terminal_now();
    g_saved_fd = -1;
    throw;
  }
}

RawTerminal::~RawTerminal() {
  restore_terminal_now();
  g_saved_fd = -1;
}

void RawTerminal::suspend() { restore_terminal_now(); }

void RawTerminal::resume() {
  pending_.clear();
  enter_raw(fd_, true);
}

void RawTerminal::keys_on_normal_screen() {
  pending_.clear();
  enter_raw(fd_, false);
}

Key RawTerminal::read_key(int timeout_ms) {
  if (pending_.empty()) {
    pollfd ready{fd_, POLLIN, 0};
    if (poll(&ready, 1, timeout_ms) <= 0) return {};
    char buffer[64];
    ssize_t got = ::read(fd_, buffer, sizeof buffer);
    if (got <= 0) return {};
    pending_.assign(buffer, static_cast<std::size_t>(got));
    // A lone Esc may be the start of an arrow key whose rest is still on its way.
    if (pending_ == "\x1b") {
      pollfd more{fd_, POLLIN, 0};
      if (poll(&more, 1, 30) > 0) {
        got = ::read(fd_, buffer, sizeof buffer);
        if (got > 0) pending_.append(buffer, static_cast<std::size_t>(got));
      }
    }
  }
  auto take = [this](std::size_t count, Key key) {
    pending_.erase(0, count);
    return key;
  };
  if (pending_.rfind("\x1b[A", 0) == 0 || pending_.rfind("\x1bOA", 0) == 0)
    return take(3, {KeyKind::kUp, 0});
  if (pending_.rfind("\x1b[B", 0) == 0 || pending_.rfind("\x1bOB", 0) == 0)
    return take(3, {KeyKind::kDown, 0});
  if (pending_.rfind("\x1b[", 0) == 0 || pending_.rfind("\x1bO", 0) == 0) {
    // Another escape sequence (Home, F1, ...): drop it whole.
    std::size_t end = 2;
    while (end < pending_.size() && !(pending_[end] >= 0x40 && pending_[end] <= 0x7e)) ++end;
    return take(std::min(end + 1, pending_.size()), {});
  }
  char ch = pending_[0];
  if (ch == '\x1b') return take(1, {KeyKind::kEscape, 0});
  if (ch == '\r' || ch == '\n') return take(1, {KeyKind::kEnter, 0});
  if (ch == 0x7f || ch == 0x08) return take(1, {KeyKind::kBackspace, 0});
  return take(1, {KeyKind::kChar, ch});
}

}  // namespace gpuleak::cli
