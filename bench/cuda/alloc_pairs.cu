// Times allocate/free pairs of 1 MiB: stream-ordered (cudaMallocAsync +
// cudaFreeAsync) and synchronous (cudaMalloc + cudaFree). Prints one JSON
// object with the median time per pair over several rounds, so the same
// binary can be run natively, under gpuleak and under compute-sanitizer and
// the runs compared (bench/run_collector_overhead.py does that).
//
// With GPULEAK_BENCH_IN_PROCESS=1 under the collector, every round is run
// three times in this one process: capture off, on but empty, and recording.
// Under the CUPTI backend that is the collector's gpuleak_benchmark_callbacks
// switch (callbacks off / empty / recording); under the preloaded
// interposer, gpuleak_benchmark_interposer (wrappers that only forward /
// hooks that return at once / recording). From one process to the next the
// native pair's time varies by more than the collector's cost; inside one
// process the three are directly comparable.
//
// usage: alloc_pairs [ROUNDS] [ASYNC_PAIRS] [SYNC_PAIRS] [SITES]
// SITES (1 to 64) call sites take turns, pair after pair, each reaching the
// CUDA calls through one allocating function, as a program's many
// allocation sites reach the driver through one allocator.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#define CHECK(call)                                                           \
  do {                                                                        \
    cudaError_t s_ = (call);                                                  \
    if (s_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(s_)); \
      std::exit(2);                                                           \
    }                                                                         \
  } while (0)

using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The one allocating function every call site goes through.
__attribute__((noinline)) static void async_pair(cudaStream_t stream) {
  void* p = nullptr;
  CHECK(cudaMallocAsync(&p, 1 << 20, stream));
  CHECK(cudaFreeAsync(p, stream));
  asm volatile("" ::: "memory");  // keep the frame: no tail call
}

__attribute__((noinline)) static void sync_pair() {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 1 << 20));
  CHECK(cudaFree(p));
  asm volatile("" ::: "memory");
}

// Call site K of both: its own return address into them.
template <int K>
__attribute__((noinline)) static void async_site(cudaStream_t stream) {
  async_pair(stream);
  asm volatile("" ::: "memory");
}

template <int K>
__attribute__((noinline)) static void sync_site() {
  sync_pair();
  asm volatile("" ::: "memory");
}

constexpr int kMaxSites = 64;
using AsyncSite = void (*)(cudaStream_t);
using SyncSite = void (*)();

template <int... K>
static std::array<AsyncSite, sizeof...(K)> make_async_sites(std::integer_sequence<int, K...>) {
  return {&async_site<K>...};
}
template <int... K>
static std::array<SyncSite, sizeof...(K)> make_sync_sites(std::integer_sequence<int, K...>) {
  return {&sync_site<K>...};
}
static const auto kAsyncSites = make_async_sites(std::make_integer_sequence<int, kMaxSites>{});
static const auto kSyncSites = make_sync_sites(std::make_integer_sequence<int, kMaxSites>{});
static int g_sites = 1;

static double async_pair_us(cudaStream_t stream, int pairs) {
  auto start = Clock::now();
  int turn = 0;
  for (int i = 0; i < pairs; ++i) {
    kAsyncSites[turn](stream);
    if (++turn == g_sites) turn = 0;
  }
  CHECK(cudaStreamSynchronize(stream));
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / pairs;
}

static double sync_pair_us(int pairs) {
  auto start = Clock::now();
  int turn = 0;
  for (int i = 0; i < pairs; ++i) {
    kSyncSites[turn]();
    if (++turn == g_sites) turn = 0;
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / pairs;
}

using BenchmarkSwitch = int (*)(int);

struct CaptureSwitch {
  BenchmarkSwitch set_mode = nullptr;
  const char* mode_names[3] = {};
};

// The interposer's switch when `gpuleak run` preloaded it (the default
// backend), else CUPTI's.
static CaptureSwitch find_benchmark_switch() {
  CaptureSwitch found;
  const char* collector = std::getenv("CUDA_INJECTION64_PATH");
  if (!collector) return found;
  void* handle = dlopen(collector, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return found;
  bool interposed = dlsym(RTLD_DEFAULT, "gpuleak_interposer_attach") != nullptr;
  const char* name = interposed ? "gpuleak_benchmark_interposer" : "gpuleak_benchmark_callbacks";
  found.set_mode = reinterpret_cast<BenchmarkSwitch>(dlsym(handle, name));
  const char* interposer_modes[3] = {"wrappers_only", "empty_hooks", "recording"};
  const char* cupti_modes[3] = {"callbacks_off", "empty_callbacks", "recording"};
  for (int m = 0; m < 3; ++m)
    found.mode_names[m] = interposed ? interposer_modes[m] : cupti_modes[m];
  return found;
}

static void print_list(const char* name, const std::vector<double>& v, bool last) {
  std::printf("\"%s\": [", name);
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.4f", i ? ", " : "", v[i]);
  std::printf("]%s", last ? "" : ", ");
}

// Rounds of (callbacks off, empty, recording), each mode timed in turn. The
// order turns by one each round, so no mode always follows the same other.
static int run_in_process(const CaptureSwitch& capture, cudaStream_t stream, int rounds,
                          int async_pairs, int sync_pairs) {
  BenchmarkSwitch set_mode = capture.set_mode;
  const char* const* names = capture.mode_names;
  std::vector<double> a[3], s[3];
  for (int r = 0; r < rounds; ++r) {
    for (int turn = 0; turn < 3; ++turn) {
      int mode = (r + turn) % 3;
      if (set_mode(mode) != 0) {
        std::fprintf(stderr, "the collector's benchmark switch (%s) failed\n", names[mode]);
        return 2;
      }
      a[mode].push_back(async_pair_us(stream, async_pairs));
      s[mode].push_back(sync_pair_us(sync_pairs));
    }
  }
  set_mode(2);
  std::printf(
      "{\"in_process\": true, \"sites\": %d, \"rounds\": %d, "
      "\"async_pairs_per_round\": %d, \"sync_pairs_per_round\": %d, \"async_median_us\": {",
      g_sites, rounds, async_pairs, sync_pairs);
  for (int m = 0; m < 3; ++m) std::printf("%s\"%s\": %.4f", m ? ", " : "", names[m], median(a[m]));
  std::printf("}, \"sync_median_us\": {");
  for (int m = 0; m < 3; ++m) std::printf("%s\"%s\": %.3f", m ? ", " : "", names[m], median(s[m]));
  std::printf("}, \"async_all_us\": {");
  for (int m = 0; m < 3; ++m) print_list(names[m], a[m], m == 2);
  std::printf("}, \"sync_all_us\": {");
  for (int m = 0; m < 3; ++m) print_list(names[m], s[m], m == 2);
  std::printf("}}\n");
  return 0;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  int async_pairs = argc > 2 ? std::atoi(argv[2]) : 20000;
  int sync_pairs = argc > 3 ? std::atoi(argv[3]) : 500;
  g_sites = argc > 4 ? std::atoi(argv[4]) : 1;
  if (g_sites < 1 || g_sites > kMaxSites) {
    std::fprintf(stderr, "SITES must be 1 to %d\n", kMaxSites);
    return 2;
  }
  CHECK(cudaFree(nullptr));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  // Warm up: pool creation, first-touch costs.
  async_pair_us(stream, 1000);
  sync_pair_us(20);
  const char* in_process = std::getenv("GPULEAK_BENCH_IN_PROCESS");
  if (in_process && in_process[0] == '1') {
    CaptureSwitch capture = find_benchmark_switch();
    if (!capture.set_mode) {
      std::fprintf(stderr, "GPULEAK_BENCH_IN_PROCESS=1 needs the gpuleak collector loaded\n");
      return 2;
    }
    return run_in_process(capture, stream, rounds, async_pairs, sync_pairs);
  }
  std::vector<double> a, s;
  for (int r = 0; r < rounds; ++r) {
    a.push_back(async_pair_us(stream, async_pairs));
    s.push_back(sync_pair_us(sync_pairs));
  }
  std::printf(
      "{\"async_pair_us\": %.4f, \"sync_pair_us\": %.3f, \"sites\": %d, \"rounds\": %d, "
      "\"async_pairs_per_round\": %d, \"sync_pairs_per_round\": %d, "
      "\"async_all_us\": [",
      median(a), median(s), g_sites, rounds, async_pairs, sync_pairs);
  for (size_t i = 0; i < a.size(); ++i) std::printf("%s%.4f", i ? ", " : "", a[i]);
  std::printf("], \"sync_all_us\": [");
  for (size_t i = 0; i < s.size(); ++i) std::printf("%s%.3f", i ? ", " : "", s[i]);
  std::printf("]}\n");
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
