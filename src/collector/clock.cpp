#include "collector/clock.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#if defined(__x86_64__)
#include <x86intrin.h>
#define GPULEAK_HAVE_TSC 1
#else
#define GPULEAK_HAVE_TSC 0
#endif

namespace gpuleak::collector {

namespace {

enum class Source { kMonotonic, kMonotonicCoarse, kTsc };

std::atomic<Source> g_source{Source::kMonotonic};
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

// ---- The TSC, mapped onto CLOCK_MONOTONIC ------------------------------------
//
// ns = base_ns + ((tsc - base_tsc) * slope) >> 32, slope in ns per tick * 2^32.
// The mapping is published under a sequence lock: the writer thread
// re-anchors it every flush (recalibrate_clock) and readers retry on the
// rare read that overlaps an update.

#if GPULEAK_HAVE_TSC
struct TscMapping {
  std::atomic<std::uint32_t> sequence{0};
  std::atomic<std::uint64_t> base_tsc{0};
  std::atomic<std::uint64_t> base_ns{0};
  std::atomic<std::uint64_t> slope{0};
};
// The 64x32-bit products of the TSC mapping need 96 bits; GCC and clang's
// 128-bit integer is an extension (-Wpedantic says so), hence __extension__.
__extension__ typedef unsigned __int128 Uint128;

TscMapping g_tsc;

// The first anchor, for the long-baseline rate; writer-side only.
std::uint64_t g_first_tsc = 0, g_first_ns = 0;

inline std::uint64_t map_tsc(std::uint64_t tsc, std::uint64_t base_tsc, std::uint64_t base_ns,
                             std::uint64_t slope) {
  // A read racing an update may see a TSC just before the new base.
  std::uint64_t ticks = tsc > base_tsc ? tsc - base_tsc : 0;
  return base_ns + static_cast<std::uint64_t>((static_cast<Uint128>(ticks) * slope) >> 32);
}

std::uint64_t tsc_now_ns() {
  for (;;) {
    std::uint32_t before = g_tsc.sequence.load(std::memory_order_acquire);
    std::uint64_t base_tsc = g_tsc.base_tsc.load(std::memory_order_relaxed);
    std::uint64_t base_ns = g_tsc.base_ns.load(std::memory_order_relaxed);
    std::uint64_t slope = g_tsc.slope.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((before & 1) == 0 && g_tsc.sequence.load(std::memory_order_relaxed) == before) {
      return map_tsc(__rdtsc(), base_tsc, base_ns, slope);
    }
  }
}

void publish(std::uint64_t base_tsc, std::uint64_t base_ns, std::uint64_t slope) {
  std::uint32_t sequence = g_tsc.sequence.load(std::memory_order_relaxed);
  g_tsc.sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  g_tsc.base_tsc.store(base_tsc, std::memory_order_relaxed);
  g_tsc.base_ns.store(base_ns, std::memory_order_relaxed);
  g_tsc.slope.store(slope, std::memory_order_relaxed);
  g_tsc.sequence.store(sequence + 2, std::memory_order_release);
}

// A (TSC, CLOCK_MONOTONIC) pair read as close together as the machine
// allows: the best bracket of a few tries.
void read_pair(std::uint64_t* tsc, std::uint64_t* ns) {
  std::uint64_t best_gap = ~0ull;
  for (int i = 0; i < 5; ++i) {
    std::uint64_t before = __rdtsc();
    std::uint64_t mono = read(CLOCK_MONOTONIC);
    std::uint64_t after = __rdtsc();
    if (after - before < best_gap) {
      best_gap = after - before;
      *tsc = before + (after - before) / 2;
      *ns = mono;
    }
  }
}

// The kernel keeps CLOCK_MONOTONIC on the TSC only when it found the TSC
// invariant and synchronized across CPUs; then so can we.
bool tsc_trustworthy() {
  std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  if (!(source >> name) || name != "tsc") return false;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream flags(line);
    bool constant = false, nonstop = false;
    for (std::string flag; flags >> flag;) {
      constant = constant || flag == "constant_tsc";
      nonstop = nonstop || flag == "nonstop_tsc";
    }
    return constant && nonstop;
  }
  return false;
}

// A first rate from a 2 ms spin; recalibrate_clock() refines it.
bool start_tsc() {
  if (!tsc_trustworthy()) return false;
  std::uint64_t tsc0, ns0, tsc1, ns1;
  read_pair(&tsc0, &ns0);
  do {
    read_pair(&tsc1, &ns1);
  } while (ns1 - ns0 < 2'000'000);
  if (tsc1 <= tsc0) return false;
  auto slope = static_cast<std::uint64_t>((static_cast<Uint128>(ns1 - ns0) << 32) / (tsc1 - tsc0));
  if (slope == 0) return false;
  g_first_tsc = tsc0;
  g_first_ns = ns0;
  publish(tsc1, ns1, slope);
  return true;
}
#endif  // GPULEAK_HAVE_TSC

const char* source_name(Source source) {
  switch (source) {
    case Source::kMonotonicCoarse:
      return "monotonic-coarse";
    case Source::kTsc:
      return "tsc";
    default:
      return "monotonic";
  }
}

}  // namespace

void choose_clock(const std::string& setting) {
  g_precise_read_ns = measure_precise_read_ns();
  Source source = Source::kMonotonic;
  if (setting == "coarse") {
    source = Source::kMonotonicCoarse;
  } else if (setting != "precise") {
#if GPULEAK_HAVE_TSC
    if (start_tsc()) source = Source::kTsc;
#endif
    if (source != Source::kTsc && g_precise_read_ns > kSlowClockNs) {
      source = Source::kMonotonicCoarse;
    }
  }
  g_source.store(source, std::memory_order_relaxed);
}

[[gnu::hot]] std::uint64_t now_ns() {
  switch (g_source.load(std::memory_order_relaxed)) {
#if GPULEAK_HAVE_TSC
    case Source::kTsc:
      return tsc_now_ns();
#endif
    case Source::kMonotonicCoarse:
      return read(CLOCK_MONOTONIC_COARSE);
    default:
      return read(CLOCK_MONOTONIC);
  }
}

void recalibrate_clock() {
#if GPULEAK_HAVE_TSC
  if (g_source.load(std::memory_order_relaxed) != Source::kTsc) return;
  std::uint64_t tsc, mono;
  read_pair(&tsc, &mono);
  if (tsc <= g_first_tsc || mono <= g_first_ns) return;
  // The rate over everything since the start: its error shrinks as the
  // process runs (two reads' jitter over the whole baseline).
  double rate = static_cast<double>(mono - g_first_ns) / static_cast<double>(tsc - g_first_tsc);
  std::uint64_t current = map_tsc(tsc, g_tsc.base_tsc.load(std::memory_order_relaxed),
                                  g_tsc.base_ns.load(std::memory_order_relaxed),
                                  g_tsc.slope.load(std::memory_order_relaxed));
  // Continue from where the mapping is now (never a jump back), steering so
  // the difference to CLOCK_MONOTONIC is gone one second later; the slope
  // stays within half and one and a half times the rate, so time only grows.
  double ahead_ns = static_cast<double>(current) - static_cast<double>(mono);
  double ticks_per_second = 1e9 / rate;
  double steered = rate - ahead_ns / ticks_per_second;
  steered = std::clamp(steered, rate * 0.5, rate * 1.5);
  std::uint64_t base_ns = current;
  if (ahead_ns < -1e6) base_ns = mono;  // behind by over 1 ms (a suspend?): jump forward
  publish(tsc, base_ns, static_cast<std::uint64_t>(steered * 4294967296.0));
#endif
}

std::string clock_annotation() {
  Source source = g_source.load(std::memory_order_relaxed);
  double resolution_ns = 1.0;
  if (source != Source::kTsc) {
    struct timespec resolution {};
    clock_getres(source == Source::kMonotonicCoarse ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC,
                 &resolution);
    resolution_ns =
        static_cast<double>(resolution.tv_sec) * 1e9 + static_cast<double>(resolution.tv_nsec);
  }
  char text[160];
  std::snprintf(text, sizeof text,
                "{\"clock\": \"%s\", \"resolution_ns\": %.0f, \"monotonic_read_ns\": %.1f}",
                source_name(source), resolution_ns, g_precise_read_ns);
  return text;
}

}  // namespace gpuleak::collector
