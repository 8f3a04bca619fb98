// The collector's own cost per stream-ordered allocate/free pair on the
// interposer path (what `gpuleak run` uses), without a GPU: the program
// reaches a driver the way the CUDA runtime does (dlopen libcuda.so.1,
// cuGetProcAddress for every entry point, cuInit), and the driver is the
// stand-in of the collector's tests (tests/collector/stand_in_driver.c, on
// LD_LIBRARY_PATH), whose pair costs a few nanoseconds: what is left is the
// interposer's wrappers and the collector's work per event.
//
// Run it with LD_PRELOAD=libgpuleak_interposer.so and CUDA_INJECTION64_PATH
// naming the collector, as `gpuleak run` starts a program (HOOKS chooses what
// the wrappers do), or with neither for the calls alone (HOOKS "native").
//
// SITES call sites (1 to 64) take turns, pair after pair, each reaching the
// driver through one allocating function (as bench/cuda/alloc_pairs.cu does on
// the GPU), DEPTH frames below main's loop.
//
// Prints one JSON line: ns per pair in this thread's CPU time (a shared
// machine's wall clock also counts other processes) and in wall time, and
// the whole process's CPU time per pair (the writer thread's encoding and
// compression included).
//
// usage: interposer_pairs HOOKS [PAIRS] [DEPTH] [SITES]
//   HOOKS  native    no interposer, no collector (run without LD_PRELOAD)
//          detached  the interposer's wrappers with no collector attached
//          empty     the collector attached with hooks that return at once
//          recording the collector recording (the default under gpuleak run)
#include <cuda.h>
#include <dlfcn.h>
#include <time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);
using Init = CUresult (*)(unsigned);
using Retain = CUresult (*)(CUcontext*, CUdevice);
using AllocAsync = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using FreeAsync = CUresult (*)(CUdeviceptr, CUstream);
using BenchmarkSwitch = int (*)(int);

AllocAsync g_alloc;
FreeAsync g_free;
const CUstream kStream = reinterpret_cast<CUstream>(0x5);
int g_failures = 0;

// The one allocating function every site calls.
__attribute__((noinline)) void allocate_and_free() {
  CUdeviceptr p = 0;
  if (g_alloc(&p, 1 << 20, kStream) != CUDA_SUCCESS) ++g_failures;
  if (g_free(p, kStream) != CUDA_SUCCESS) ++g_failures;
  asm volatile("" ::: "memory");  // keep the frame: no tail call
}

// Call site number K: its own return address into the wrapper.
template <int K>
__attribute__((noinline)) void site() {
  allocate_and_free();
  asm volatile("" ::: "memory");
}

constexpr int kMaxSites = 64;
using SiteFn = void (*)();

template <int... K>
constexpr std::array<SiteFn, sizeof...(K)> make_sites(std::integer_sequence<int, K...>) {
  return {&site<K>...};
}
constexpr auto kSites = make_sites(std::make_integer_sequence<int, kMaxSites>{});

// A call chain `depth` frames deep, so stacks look like a real program's.
__attribute__((noinline)) std::uint64_t nest(int depth, std::uint64_t pairs, int sites) {
  if (depth > 0) return nest(depth - 1, pairs, sites) + 1;
  int turn = 0;
  for (std::uint64_t i = 0; i < pairs; ++i) {
    kSites[turn]();
    if (++turn == sites) turn = 0;
  }
  return 0;
}

double cpu_ns(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

template <class F>
bool look_up(GetProcAddress get, const char* name, F& slot) {
  void* pointer = nullptr;
  CUdriverProcAddressQueryResult status;
  if (get(name, &pointer, 12000, 0, &status) != CUDA_SUCCESS || !pointer) return false;
  slot = reinterpret_cast<F>(pointer);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* hooks = argc > 1 ? argv[1] : "recording";
  std::uint64_t pairs = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 300000;
  int depth = argc > 3 ? std::atoi(argv[3]) : 12;
  int sites = argc > 4 ? std::atoi(argv[4]) : 1;
  int mode = std::strcmp(hooks, "detached") == 0    ? 0
             : std::strcmp(hooks, "empty") == 0     ? 1
             : std::strcmp(hooks, "recording") == 0 ? 2
             : std::strcmp(hooks, "native") == 0    ? -1
                                                    : -2;
  if (mode == -2 || sites < 1 || sites > kMaxSites) {
    std::fprintf(stderr,
                 "usage: interposer_pairs native|detached|empty|recording [PAIRS] [DEPTH] "
                 "[SITES 1-64]\n");
    return 2;
  }
  // What libcudart does when it starts: every entry point before cuInit.
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto get =
      driver ? reinterpret_cast<GetProcAddress>(::dlsym(driver, "cuGetProcAddress_v2")) : nullptr;
  Init init = nullptr;
  Retain retain = nullptr;
  if (!get || !look_up(get, "cuInit", init) || !look_up(get, "cuDevicePrimaryCtxRetain", retain) ||
      !look_up(get, "cuMemAllocAsync", g_alloc) || !look_up(get, "cuMemFreeAsync", g_free)) {
    std::fprintf(stderr, "interposer_pairs: no driver (LD_LIBRARY_PATH names the stand-in?)\n");
    return 3;
  }
  CUcontext context = nullptr;
  if (init(0) != CUDA_SUCCESS || retain(&context, 0) != CUDA_SUCCESS) return 3;
  if (mode >= 0) {
    // The collector the driver's cuInit loaded (CUDA_INJECTION64_PATH).
    const char* injection = std::getenv("CUDA_INJECTION64_PATH");
    void* collector = injection ? ::dlopen(injection, RTLD_NOLOAD | RTLD_LAZY) : nullptr;
    auto set_hooks = reinterpret_cast<BenchmarkSwitch>(
        collector ? ::dlsym(collector, "gpuleak_benchmark_interposer") : nullptr);
    if (!set_hooks || set_hooks(mode) != 0) {
      std::fprintf(stderr, "interposer_pairs: no collector with the interposer preloaded\n");
      return 4;
    }
  }
  nest(depth, 20000, sites);  // warm up: stack table, remembered stacks, unwinder cache
  double thread_begin = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  double process_begin = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  auto begin = std::chrono::steady_clock::now();
  nest(depth, pairs, sites);
  double wall =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count();
  double thread = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - thread_begin;
  double process = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - process_begin;
  auto per_pair = [pairs](double ns) { return ns / static_cast<double>(pairs); };
  std::printf(
      "{\"hooks\": \"%s\", \"pairs\": %llu, \"depth\": %d, \"sites\": %d, \"failures\": %d, "
      "\"cpu_ns_per_pair\": %.1f, \"process_cpu_ns_per_pair\": %.1f, \"ns_per_pair\": %.1f}\n",
      hooks, static_cast<unsigned long long>(pairs), depth, sites, g_failures, per_pair(thread),
      per_pair(process), per_pair(wall));
  return g_failures == 0 ? 0 : 5;
}
