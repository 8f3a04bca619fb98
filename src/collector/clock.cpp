#include "collector/clock.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace gpuleak::collector {

namespace {

std::atomic<clockid_t> g_clock{CLOCK_MONOTONIC};
double g_precise_read_ns = 0.0;

std::uint64_t read(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// Median over a few batches, so one preemption does not decide.
double measure_precise_read_ns() {
  constexpr int kBatches = 5, kReads = 200;
  double batch_ns[kBatches];
  for (double& per_read : batch_ns) {
    std::uint64_t begin = read(CLOCK_MONOTONIC);
    for (int i = 0; i < kReads - 1; ++i) read(CLOCK_MONOTONIC);
    per_read = static_cast<double>(read(CLOCK_MONOTONIC) - begin) / kReads;
  }
  std::sort(batch_ns, batch_ns + kBatches);
  return batch_ns[kBatches / 2];
}

// "monotonic" or "monotonic-coarse".
std::string clock_name() {
  return g_clock.load(std::memory_order_relaxed) == CLOCK_MONOTONIC_COARSE ? "monotonic-coarse"
                                                                           : "monotonic";
}

}  // namespace

void choose_clock(const std::string& setting) {
  g_precise_read_ns = measure_precise_read_ns();
  bool coarse = setting == "coarse" || (setting != "precise" && g_precise_read_ns > kSlowClockNs);
  g_clock.store(coarse ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC, std::memory_order_relaxed);
}

std::uint64_t now_ns() { return read(g_clock.load(std::memory_order_relaxed)); }

std::string clock_annotation() {
  struct timespec resolution {};
  clock_getres(g_clock.load(std::memory_order_relaxed), &resolution);
  double resolution_ns = static_cast<double>(resolution.tv_sec) * 1e9 +
                         static_cast<double>(resolution.tv_nsec);
  char text[160];
  std::snprintf(text, sizeof text,
                "{\"clock\": \"%s\", \"resolution_ns\": %.0f, \"monotonic_read_ns\": %.1f}",
                clock_name().c_str(), resolution_ns, g_precise_read_ns);
  return text;
}

}  // namespace gpuleak::collector
