// The collector's own cost per allocate/free pair, without CUDA: drives the
// recorder through its C API (the path PyTorch's allocator hook takes), with
// native stack capture, from a call chain of known depth. Prints JSON:
// nanoseconds per pair with the collector recording, and with it disabled
// (GPULEAK_DISABLE=1 in a second run gives the baseline of the calls alone).
//
// SITES call sites (1 to 64) take turns, pair after pair, each reaching the
// collector through one allocating wrapper, as a program's many allocation
// sites reach it through one allocator: every capture then starts at the
// same place, and only the frames below the wrapper tell the sites apart.
//
// PAIRS_PER_SECOND paces the loop (0: as fast as it goes), for what a
// loaded machine loses at a given event rate (bench/run_collector_under_load.py).
//
// usage: collector_api_pairs LIBGPULEAK_COLLECTOR [PAIRS] [DEPTH] [SITES] [PAIRS_PER_SECOND]
#include <dlfcn.h>
#include <time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

using AllocFn = void (*)(std::uint64_t, std::uint64_t, int, std::uint64_t);
using FreeFn = void (*)(std::uint64_t, int);
using StartFn = int (*)();

static AllocFn g_alloc;
static FreeFn g_free;

// The one allocating function every site calls.
__attribute__((noinline)) static void allocate_and_free(std::uint64_t address) {
  g_alloc(address, 4096, 0, 0);
  g_free(address, 0);
  asm volatile("" ::: "memory");  // keep the frame: no tail call
}

// Call site number K: its own return address into the wrapper.
template <int K>
__attribute__((noinline)) static void site(std::uint64_t address) {
  allocate_and_free(address + K);
  asm volatile("" ::: "memory");
}

constexpr int kMaxSites = 64;
using SiteFn = void (*)(std::uint64_t);

template <int... K>
constexpr std::array<SiteFn, sizeof...(K)> make_sites(std::integer_sequence<int, K...>) {
  return {&site<K>...};
}
constexpr auto kSites = make_sites(std::make_integer_sequence<int, kMaxSites>{});

static double g_pairs_per_second = 0;

// A call chain `depth` frames deep, so stacks look like a real program's.
__attribute__((noinline)) static std::uint64_t nest(int depth, std::uint64_t pairs, int sites) {
  if (depth > 0) return nest(depth - 1, pairs, sites) + 1;
  int turn = 0;
  auto begin = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < pairs; ++i) {
    kSites[turn](0x100000 + (i & 1023) * 4096);
    if (++turn == sites) turn = 0;
    if (g_pairs_per_second > 0 && (i & 255) == 255) {
      auto due =
          begin +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::duration<double>(static_cast<double>(i + 1) / g_pairs_per_second));
      std::this_thread::sleep_until(due);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::uint64_t pairs = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
  int depth = argc > 3 ? std::atoi(argv[3]) : 12;
  int sites = argc > 4 ? std::atoi(argv[4]) : 1;
  g_pairs_per_second = argc > 5 ? std::atof(argv[5]) : 0;
  if (sites < 1 || sites > kMaxSites) {
    std::fprintf(stderr, "SITES must be 1 to %d\n", kMaxSites);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  g_alloc = reinterpret_cast<AllocFn>(dlsym(lib, "gpuleak_record_torch_alloc"));
  g_free = reinterpret_cast<FreeFn>(dlsym(lib, "gpuleak_record_torch_free"));
  auto start_recording = reinterpret_cast<StartFn>(dlsym(lib, "gpuleak_start_recording"));
  int recording = start_recording();
  nest(depth, 10000, sites);  // warm up: stack table, unwinder cache
  // CPU time of this thread too: on a shared machine the wall clock also
  // counts the time other processes had the core.
  auto thread_ns = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
  };
  double cpu_begin = thread_ns();
  auto begin = std::chrono::steady_clock::now();
  nest(depth, pairs, sites);
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count();
  double cpu_ns = thread_ns() - cpu_begin;
  std::printf(
      "{\"recording\": %d, \"pairs\": %llu, \"depth\": %d, \"sites\": %d, \"ns_per_pair\": %.1f, "
      "\"cpu_ns_per_pair\": %.1f}\n",
      recording, static_cast<unsigned long long>(pairs), depth, sites,
      ns / static_cast<double>(pairs), cpu_ns / static_cast<double>(pairs));
  return 0;
}
