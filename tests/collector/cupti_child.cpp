// A program that plays a CUDA application for the collector's CUPTI path on
// a machine without a GPU. It loads libgpuleak_collector.so, starts it as the
// driver would (InitializeInjection), and makes driver calls through the
// stand-in CUPTI (stand_in_cupti.c), which the collector found through
// GPULEAK_CUPTI_LIBRARY and subscribed to.
//
//   cupti_child COLLECTOR.so STAND_IN_CUPTI.so events
//       retains a primary context; 10 stream-ordered 1 MiB pairs (the pool
//       reuses the address); 3 x 256 KiB stream-ordered blocks leaked from
//       leak_async_blocks(); a free of an address never handed out (fails);
//       a 2 TiB allocation (fails: out of memory); a cuMemAlloc/cuMemFree
//       pair; 8 KiB leaked by cuMemAlloc from leak_sync_block()
//   cupti_child COLLECTOR.so STAND_IN_CUPTI.so events-after-another-client
//       the same, after subscribing to CUPTI first, as a profiler would
//   cupti_child COLLECTOR.so STAND_IN_CUPTI.so events-initialized-twice
//       the same, after InitializeInjection ran twice (the driver or a
//       library initializing again)
//   cupti_child COLLECTOR.so STAND_IN_CUPTI.so events-initialized-concurrently
//       the same, after 8 threads called InitializeInjection at once
//   cupti_child COLLECTOR.so STAND_IN_CUPTI.so callers
//       leaks 4 KiB blocks from caller_a() and 8 KiB blocks from caller_b(),
//       both through allocate_block(), so that each allocation is made at
//       the same stack address: runs of one caller, then the two taking
//       turns (what a remembered stack must tell apart)
//   cupti_child COLLECTOR.so STAND_IN_CUPTI.so many-callers
//       80 callers (more than a thread remembers) reach allocate_block in
//       turn, 48 in turn, two in turn and in runs; caller K allocates
//       4096 * (K + 1) bytes
//   cupti_child COLLECTOR.so STAND_IN_CUPTI.so bench PAIRS ROUNDS DEPTH
//       the CPU counterpart of bench/cuda/alloc_pairs --in-process: each
//       round times PAIRS stream-ordered alloc/free pairs DEPTH frames deep
//       with the callbacks off, on but empty, and recording; prints JSON
//
// Built with -g -O0 so native stacks name the leaking functions.
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collector/stand_in_cupti.h"

namespace {

struct Driver {
  StandInPrimaryCtxRetain primary_ctx_retain;
  StandInMemAllocAsync mem_alloc_async;
  StandInMemFreeAsync mem_free_async;
  StandInMemAlloc mem_alloc;
  StandInMemFree mem_free;
};

Driver driver;
int (*benchmark_callbacks)(int mode) = nullptr;

void* open_library(const char* path) {
  void* library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::fprintf(stderr, "cupti_child: %s\n", ::dlerror());
    std::exit(91);
  }
  return library;
}

template <class F>
void find(void* library, F& slot, const char* name) {
  slot = reinterpret_cast<F>(::dlsym(library, name));
  if (!slot) {
    std::fprintf(stderr, "cupti_child: %s is not exported\n", name);
    std::exit(90);
  }
}

void CUPTIAPI other_client_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Another tool (a profiler) subscribed to CUPTI before the collector started.
void subscribe_as_another_client(const char* stand_in_path) {
  void* cupti = open_library(stand_in_path);
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  find(cupti, subscribe, "cuptiSubscribe");
  CUpti_SubscriberHandle handle = nullptr;
  if (subscribe(&handle, other_client_callback, nullptr) != CUPTI_SUCCESS) std::exit(92);
}

void load(const char* collector_path, const char* stand_in_path, int initializations, int threads) {
  void* collector = open_library(collector_path);
  int (*initialize)() = nullptr;
  find(collector, initialize, "InitializeInjection");
  find(collector, benchmark_callbacks, "gpuleak_benchmark_callbacks");
  if (threads > 1) {
    std::vector<std::thread> racing;
    for (int i = 0; i < threads; ++i) racing.emplace_back([initialize] { initialize(); });
    for (auto& t : racing) t.join();
  }
  for (int i = 0; i < initializations; ++i) initialize();
  // The collector loaded the stand-in by this path: the same copy, so its
  // callbacks reach the collector's subscription.
  void* cupti = open_library(stand_in_path);
  find(cupti, driver.primary_ctx_retain, "stand_in_cuDevicePrimaryCtxRetain");
  find(cupti, driver.mem_alloc_async, "stand_in_cuMemAllocAsync");
  find(cupti, driver.mem_free_async, "stand_in_cuMemFreeAsync");
  find(cupti, driver.mem_alloc, "stand_in_cuMemAlloc");
  find(cupti, driver.mem_free, "stand_in_cuMemFree");
}

const CUstream kStream = reinterpret_cast<CUstream>(0x5);

void check(CUresult result, CUresult expected, const char* what) {
  if (result != expected) {
    std::fprintf(stderr, "cupti_child: %s returned %d, expected %d\n", what, result, expected);
    std::exit(3);
  }
}

__attribute__((noinline)) void leak_async_blocks() {
  for (int i = 0; i < 3; ++i) {
    CUdeviceptr p = 0;
    CUresult result = driver.mem_alloc_async(&p, 256 << 10, kStream);  // MARK: async leak
    check(result, CUDA_SUCCESS, "cuMemAllocAsync");
  }
}

__attribute__((noinline)) void leak_sync_block() {
  CUdeviceptr p = 0;
  check(driver.mem_alloc(&p, 8192), CUDA_SUCCESS, "cuMemAlloc");  // MARK: sync leak
}

int events() {
  CUcontext context = nullptr;
  check(driver.primary_ctx_retain(&context, 0), CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
  for (int i = 0; i < 10; ++i) {
    CUdeviceptr p = 0;
    check(driver.mem_alloc_async(&p, 1 << 20, kStream), CUDA_SUCCESS, "cuMemAllocAsync");
    check(driver.mem_free_async(p, kStream), CUDA_SUCCESS, "cuMemFreeAsync");
  }
  leak_async_blocks();
  check(driver.mem_free_async(0x1234, kStream), CUDA_ERROR_INVALID_VALUE, "bogus cuMemFreeAsync");
  CUdeviceptr huge = 0;
  check(driver.mem_alloc_async(&huge, 2ull << 40, kStream), CUDA_ERROR_OUT_OF_MEMORY,
        "2 TiB cuMemAllocAsync");
  CUdeviceptr p = 0;
  check(driver.mem_alloc(&p, 4096), CUDA_SUCCESS, "cuMemAlloc");
  check(driver.mem_free(p), CUDA_SUCCESS, "cuMemFree");
  leak_sync_block();
  std::printf("done\n");
  return 0;
}

// ---- callers -------------------------------------------------------------------

__attribute__((noinline)) void allocate_block(std::uint64_t size) {
  CUdeviceptr p = 0;
  check(driver.mem_alloc_async(&p, size, kStream), CUDA_SUCCESS, "cuMemAllocAsync");
}

// Same code, so same frame size: the driver call happens at the same stack
// address from either.
__attribute__((noinline)) void caller_a() {
  allocate_block(4096);
  asm volatile("" ::: "memory");  // keep the frame: no tail call
}

__attribute__((noinline)) void caller_b() {
  allocate_block(8192);
  asm volatile("" ::: "memory");
}

int callers() {
  int a = 0, b = 0;
  auto run = [&](int count, bool from_a) {
    for (int i = 0; i < count; ++i) {
      if (from_a)
        caller_a(), ++a;
      else
        caller_b(), ++b;
    }
  };
  run(20, true);
  run(20, false);
  for (int i = 0; i < 20; ++i) run(1, i % 2 == 0);
  for (int i = 0; i < 10; ++i) run(1 + i % 5, i % 3 == 0);
  std::printf("a=%d b=%d\n", a, b);
  return 0;
}

// ---- many callers --------------------------------------------------------------

// Caller K allocates 4096 * (K + 1) bytes through allocate_block, so the
// report can tell from a group's size which caller its stack must name.
constexpr int kManyCallers = 80;  // more than a thread remembers

template <int K>
__attribute__((noinline)) void many_caller() {
  allocate_block(4096ull * (K + 1));
  asm volatile("" ::: "memory");
}

template <int... K>
constexpr std::array<void (*)(), sizeof...(K)> make_many_callers(std::integer_sequence<int, K...>) {
  return {&many_caller<K>...};
}
constexpr auto kManyCallerFunctions =
    make_many_callers(std::make_integer_sequence<int, kManyCallers>{});

int many_callers() {
  int calls = 0;
  auto call = [&](int k) {
    kManyCallerFunctions[k]();
    ++calls;
  };
  for (int round = 0; round < 5; ++round)
    for (int k = 0; k < kManyCallers; ++k) call(k);  // all in turn
  for (int i = 0; i < 200; ++i) call(i % 48);        // 48 in turn: within what is remembered
  for (int i = 0; i < 40; ++i) call(i % 2 ? 3 : 70);
  for (int k = 0; k < kManyCallers; k += 7)
    for (int i = 0; i < 5; ++i) call(k);  // runs
  std::printf("calls=%d\n", calls);
  return 0;
}

// ---- bench -------------------------------------------------------------------

__attribute__((noinline)) double time_pairs(int depth, std::uint64_t pairs) {
  if (depth > 0) {
    double ns = time_pairs(depth - 1, pairs);
    asm volatile("" ::: "memory");  // keep the frame: no tail call
    return ns;
  }
  auto begin = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < pairs; ++i) {
    CUdeviceptr p = 0;
    driver.mem_alloc_async(&p, 1 << 20, kStream);
    driver.mem_free_async(p, kStream);
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin)
             .count() /
         static_cast<double>(pairs);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench(std::uint64_t pairs, int rounds, int depth) {
  const char* names[] = {"callbacks_off", "cupti_empty_callbacks", "gpuleak"};
  std::vector<double> ns[3];
  std::vector<double> ratio[3];
  // Round -1 warms up and is not counted: the unwinder's cache, the stack
  // table, and the trace buffers, whose first growth costs page faults.
  for (int round = -1; round < rounds; ++round) {
    double round_ns[3];
    for (int mode = 0; mode < 3; ++mode) {
      if (benchmark_callbacks(mode) != 0) {
        std::fprintf(stderr, "cupti_child: the collector is not subscribed\n");
        return 4;
      }
      round_ns[mode] = time_pairs(depth, pairs);
      if (round >= 0) ns[mode].push_back(round_ns[mode]);
    }
    if (round < 0) continue;
    for (int mode = 0; mode < 3; ++mode) ratio[mode].push_back(round_ns[mode] / round_ns[0]);
  }
  benchmark_callbacks(2);
  std::printf("{\"pairs_per_round\": %llu, \"rounds\": %d, \"depth\": %d, \"configs\": {",
              static_cast<unsigned long long>(pairs), rounds, depth);
  for (int mode = 0; mode < 3; ++mode) {
    std::printf("%s\"%s\": {\"median_ns_per_pair\": %.1f, \"median_ratio_to_off\": %.3f}",
                mode ? ", " : "", names[mode], median(ns[mode]), median(ratio[mode]));
  }
  std::printf("}}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(
        stderr,
        "usage: cupti_child COLLECTOR.so STAND_IN_CUPTI.so "
        "events|events-after-another-client|callers|many-callers|bench PAIRS ROUNDS DEPTH\n");
    return 2;
  }
  std::string mode = argv[3];
  if (mode == "events-after-another-client") subscribe_as_another_client(argv[2]);
  int initializations = mode == "events-initialized-twice" ? 2 : 1;
  int threads = mode == "events-initialized-concurrently" ? 8 : 1;
  if (threads > 1) initializations = 0;
  load(argv[1], argv[2], initializations, threads);
  if (mode == "events" || mode == "events-after-another-client" ||
      mode == "events-initialized-twice" || mode == "events-initialized-concurrently")
    return events();
  if (mode == "callers") return callers();
  if (mode == "many-callers") return many_callers();
  if (mode == "bench" && argc > 6) {
    return bench(std::strtoull(argv[4], nullptr, 10), std::atoi(argv[5]), std::atoi(argv[6]));
  }
  std::fprintf(stderr, "cupti_child: unknown mode %s\n", mode.c_str());
  return 2;
}
