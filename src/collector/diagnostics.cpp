#include "collector/diagnostics.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace gpuleak::collector {

namespace {
std::atomic<bool> g_disabled{false};
std::atomic<bool> g_verbose{false};
std::atomic<void (*)(const char*)> g_disable_listener{nullptr};

void vsay(const char* format, va_list args) {
  // One write() per message so lines from several processes do not interleave.
  char line[1024];
  int n = std::snprintf(line, sizeof line, "gpuleak: ");
  n += std::vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n) - 1, format, args);
  if (n > static_cast<int>(sizeof line) - 2) n = sizeof line - 2;
  line[n++] = '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line, static_cast<std::size_t>(n));
  (void)ignored;
}
}  // namespace

void say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsay(format, args);
  va_end(args);
}

void say_verbose(const char* format, ...) {
  if (!g_verbose.load(std::memory_order_relaxed)) return;
  va_list args;
  va_start(args, format);
  vsay(format, args);
  va_end(args);
}

void set_verbose(bool verbose) { g_verbose.store(verbose); }

void disable_collector(const char* format, ...) {
  if (g_disabled.exchange(true)) return;
  char reason[768];
  va_list args;
  va_start(args, format);
  std::vsnprintf(reason, sizeof reason, format, args);
  va_end(args);
  say("collector disabled in process %d: %s; the program continues without GPU memory tracking",
      static_cast<int>(::getpid()), reason);
  if (auto listener = g_disable_listener.load()) listener(reason);
}

void set_disable_listener(void (*listener)(const char* reason)) {
  g_disable_listener.store(listener);
}

bool collector_disabled() { return g_disabled.load(std::memory_order_relaxed); }

}  // namespace gpuleak::collector
