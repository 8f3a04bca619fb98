// A program that plays a CUDA application for the interposer backend on a
// machine without a GPU. It is linked against the stand-in driver
// (stand_in_driver.c, soname libcuda.so.1) and run with
// LD_PRELOAD=libgpuleak_interposer.so and CUDA_INJECTION64_PATH naming the
// collector, as `gpuleak run` starts a program. It reaches the driver the
// three ways programs do:
//   - the CUDA runtime's way: dlopen("libcuda.so.1"), dlsym(cuGetProcAddress_v2),
//     then every entry point through cuGetProcAddress (before cuInit);
//   - dlsym of a versioned entry point (cuMemAlloc_v2);
//   - a direct call linked against libcuda (cuMemFree_v2, cuMemAllocAsync).
//
//   driver_child events [another-cupti-client STAND_IN_CUPTI.so]
//       cuInit (loads the collector); retains a primary context; 10
//       stream-ordered 1 MiB pairs through cuGetProcAddress entry points; 3 x
//       256 KiB leaked from leak_async_blocks() (through the per-thread-
//       stream entry point); a free of an unknown address (fails); a 2 TiB
//       allocation (fails); a cuMemAlloc_v2 (dlsym) + cuMemFree_v2 (linked)
//       pair; 8 KiB leaked by a linked cuMemAllocAsync from
//       leak_linked_block(). With another-cupti-client, a profiler has
//       subscribed to the stand-in CUPTI first and must keep receiving its
//       callbacks; prints "profiler callbacks N".
//   driver_child bench PAIRS ROUNDS DEPTH
//       the CPU counterpart of the pair benchmark for the interposer: each
//       round times PAIRS stream-ordered pairs DEPTH frames deep calling the
//       stand-in driver directly (native), through the interposer's wrappers
//       with no collector attached, with hooks that return at once, and
//       recording; prints JSON (compare cupti_child bench)
//   driver_child graphs-kept|graphs-destroyed
//       20 executable graphs of a 256-node graph, instantiated through the
//       entry point cuGetProcAddress gives for "cuGraphInstantiate" (the
//       driver's cuGraphInstantiateWithFlags) from instantiate_graph();
//       graphs-destroyed destroys each one (cuGraphExecDestroy, linked)
//       after use, graphs-kept never does.
//   driver_child rtld-next
//       dlsym(RTLD_NEXT, "cuMemAlloc_v2") from this program: the next
//       definition after the program, i.e. the interposer's wrapper, and
//       dlsym(RTLD_NEXT, "getenv") libc's; prints "rtld-next ok".
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collector/stand_in_cupti.h"

namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);
using AllocAsync = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using FreeAsync = CUresult (*)(CUdeviceptr, CUstream);
using Alloc = CUresult (*)(CUdeviceptr*, size_t);
using Retain = CUresult (*)(CUcontext*, CUdevice);
using Init = CUresult (*)(unsigned);

struct RuntimeTable {
  Init init;
  Retain retain;
  AllocAsync alloc_async;
  AllocAsync alloc_async_per_thread;
  FreeAsync free_async;
  Alloc alloc;  // through dlsym
};

RuntimeTable table;
const CUstream kStream = reinterpret_cast<CUstream>(0x5);

void check(CUresult result, CUresult expected, const char* what) {
  if (result != expected) {
    std::fprintf(stderr, "driver_child: %s returned %d, expected %d\n", what, result, expected);
    std::exit(3);
  }
}

template <class F>
void look_up(GetProcAddress get, const char* name, F& slot, cuuint64_t flags = 0) {
  void* pointer = nullptr;
  CUdriverProcAddressQueryResult status;
  check(get(name, &pointer, 12000, flags, &status), CUDA_SUCCESS, name);
  slot = reinterpret_cast<F>(pointer);
}

// What libcudart does when it starts: all entry points before cuInit.
void load_like_the_runtime() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    std::fprintf(stderr, "driver_child: %s\n", ::dlerror());
    std::exit(91);
  }
  auto get = reinterpret_cast<GetProcAddress>(::dlsym(driver, "cuGetProcAddress_v2"));
  if (!get) std::exit(90);
  look_up(get, "cuInit", table.init);
  look_up(get, "cuDevicePrimaryCtxRetain", table.retain);
  look_up(get, "cuMemAllocAsync", table.alloc_async);
  look_up(get, "cuMemAllocAsync", table.alloc_async_per_thread,
          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  look_up(get, "cuMemFreeAsync", table.free_async);
  table.alloc = reinterpret_cast<Alloc>(::dlsym(driver, "cuMemAlloc_v2"));
  if (!table.alloc) std::exit(90);
}

__attribute__((noinline)) void leak_async_blocks() {
  for (int i = 0; i < 3; ++i) {
    CUdeviceptr p = 0;
    CUresult result = table.alloc_async_per_thread(&p, 256 << 10, kStream);  // MARK: async leak
    check(result, CUDA_SUCCESS, "cuMemAllocAsync_ptsz");
  }
}

__attribute__((noinline)) void leak_linked_block() {
  CUdeviceptr p = 0;
  CUresult result = cuMemAllocAsync(&p, 8192, kStream);  // MARK: linked leak
  check(result, CUDA_SUCCESS, "linked cuMemAllocAsync");
}

int profiler_callbacks = 0;
void CUPTIAPI profiler_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {
  ++profiler_callbacks;
}

int events(const char* stand_in_cupti) {
  StandInMemAllocAsync profiled_alloc = nullptr;
  StandInMemFreeAsync profiled_free = nullptr;
  if (stand_in_cupti) {
    // A profiler (torch.profiler, Nsight) holds CUPTI before the program starts.
    void* cupti = ::dlopen(stand_in_cupti, RTLD_NOW | RTLD_LOCAL);
    if (!cupti) std::exit(92);
    auto subscribe =
        reinterpret_cast<CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*)>(
            ::dlsym(cupti, "cuptiSubscribe"));
    auto enable =
        reinterpret_cast<CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                         CUpti_CallbackId)>(::dlsym(cupti, "cuptiEnableCallback"));
    CUpti_SubscriberHandle handle = nullptr;
    if (!subscribe || subscribe(&handle, profiler_callback, nullptr) != CUPTI_SUCCESS)
      std::exit(92);
    enable(1, handle, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync);
    profiled_alloc =
        reinterpret_cast<StandInMemAllocAsync>(::dlsym(cupti, "stand_in_cuMemAllocAsync"));
    profiled_free =
        reinterpret_cast<StandInMemFreeAsync>(::dlsym(cupti, "stand_in_cuMemFreeAsync"));
  }
  load_like_the_runtime();
  check(table.init(0), CUDA_SUCCESS, "cuInit");
  CUcontext context = nullptr;
  check(table.retain(&context, 0), CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
  for (int i = 0; i < 10; ++i) {
    CUdeviceptr p = 0;
    check(table.alloc_async(&p, 1 << 20, kStream), CUDA_SUCCESS, "cuMemAllocAsync");
    check(table.free_async(p, kStream), CUDA_SUCCESS, "cuMemFreeAsync");
  }
  leak_async_blocks();
  check(table.free_async(0x1234, kStream), CUDA_ERROR_INVALID_VALUE, "bogus cuMemFreeAsync");
  CUdeviceptr huge = 0;
  check(table.alloc_async(&huge, 2ull << 40, kStream), CUDA_ERROR_OUT_OF_MEMORY,
        "2 TiB cuMemAllocAsync");
  CUdeviceptr p = 0;
  check(table.alloc(&p, 4096), CUDA_SUCCESS, "cuMemAlloc_v2 (dlsym)");
  check(cuMemFree_v2(p), CUDA_SUCCESS, "linked cuMemFree_v2");
  leak_linked_block();
  if (profiled_alloc) {
    CUdeviceptr q = 0;
    profiled_alloc(&q, 4096, kStream);
    profiled_free(q, kStream);
    std::printf("profiler callbacks %d\n", profiler_callbacks);
  }
  std::printf("done\n");
  return 0;
}

using GraphInstantiate = CUresult (*)(CUgraphExec*, CUgraph, unsigned long long);

__attribute__((noinline)) CUgraphExec instantiate_graph(GraphInstantiate instantiate) {
  // The stand-in driver reads a graph handle as its node count.
  CUgraph graph = reinterpret_cast<CUgraph>(std::uintptr_t{256});
  CUgraphExec exec = nullptr;
  check(instantiate(&exec, graph, 0), CUDA_SUCCESS, "cuGraphInstantiate");  // MARK: instantiate
  return exec;
}

int graphs(bool destroy) {
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) std::exit(91);
  auto get = reinterpret_cast<GetProcAddress>(::dlsym(driver, "cuGetProcAddress_v2"));
  if (!get) std::exit(90);
  GraphInstantiate instantiate = nullptr;
  look_up(get, "cuInit", table.init);
  look_up(get, "cuDevicePrimaryCtxRetain", table.retain);
  look_up(get, "cuGraphInstantiate", instantiate);
  check(table.init(0), CUDA_SUCCESS, "cuInit");
  CUcontext context = nullptr;
  check(table.retain(&context, 0), CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
  for (int step = 0; step < 20; ++step) {
    CUgraphExec exec = instantiate_graph(instantiate);
    if (destroy) check(cuGraphExecDestroy(exec), CUDA_SUCCESS, "cuGraphExecDestroy");
  }
  std::printf("done\n");
  return 0;
}

__attribute__((noinline)) double time_pairs(int depth, std::uint64_t pairs, AllocAsync alloc,
                                            FreeAsync release) {
  if (depth > 0) {
    double ns = time_pairs(depth - 1, pairs, alloc, release);
    asm volatile("" ::: "memory");  // keep the frame: no tail call
    return ns;
  }
  auto begin = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < pairs; ++i) {
    CUdeviceptr p = 0;
    alloc(&p, 1 << 20, kStream);
    release(p, kStream);
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin)
             .count() /
         static_cast<double>(pairs);
}

int bench(std::uint64_t pairs, int rounds, int depth) {
  load_like_the_runtime();
  check(table.init(0), CUDA_SUCCESS, "cuInit");
  CUcontext context = nullptr;
  check(table.retain(&context, 0), CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
  void* self = ::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  auto entry = reinterpret_cast<void* (*)(const char*)>(
      self ? ::dlsym(self, "stand_in_driver_entry") : nullptr);
  // The collector the stand-in's cuInit loaded (CUDA_INJECTION64_PATH, not global).
  const char* injection = std::getenv("CUDA_INJECTION64_PATH");
  void* collector = injection ? ::dlopen(injection, RTLD_NOLOAD | RTLD_LAZY) : nullptr;
  auto benchmark = reinterpret_cast<int (*)(int)>(
      collector ? ::dlsym(collector, "gpuleak_benchmark_interposer") : nullptr);
  if (!entry || !benchmark) {
    std::fprintf(stderr, "driver_child: no stand-in entry table or no collector benchmark hook\n");
    return 4;
  }
  auto native_alloc = reinterpret_cast<AllocAsync>(entry("cuMemAllocAsync"));
  auto native_free = reinterpret_cast<FreeAsync>(entry("cuMemFreeAsync"));
  const char* names[] = {"native", "interposer_detached", "interposer_empty_hooks", "gpuleak"};
  std::vector<double> ns[4], ratio[4];
  for (int round = -1; round < rounds; ++round) {  // round -1 warms up
    double round_ns[4];
    for (int mode = 0; mode < 4; ++mode) {
      if (benchmark(mode == 0 ? 0 : mode - 1) != 0) return 4;
      round_ns[mode] = mode == 0 ? time_pairs(depth, pairs, native_alloc, native_free)
                                 : time_pairs(depth, pairs, table.alloc_async, table.free_async);
      if (round >= 0) ns[mode].push_back(round_ns[mode]);
    }
    if (round < 0) continue;
    for (int mode = 0; mode < 4; ++mode) ratio[mode].push_back(round_ns[mode] / round_ns[0]);
  }
  benchmark(2);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("{\"pairs_per_round\": %llu, \"rounds\": %d, \"depth\": %d, \"configs\": {",
              static_cast<unsigned long long>(pairs), rounds, depth);
  for (int mode = 0; mode < 4; ++mode) {
    std::printf("%s\"%s\": {\"median_ns_per_pair\": %.1f, \"median_ratio_to_native\": %.3f}",
                mode ? ", " : "", names[mode], median(ns[mode]), median(ratio[mode]));
  }
  std::printf("}}\n");
  return 0;
}

int rtld_next() {
  void* next_alloc = ::dlsym(RTLD_NEXT, "cuMemAlloc_v2");
  void* interposer = ::dlopen("libgpuleak_interposer.so", RTLD_NOLOAD | RTLD_LAZY);
  Dl_info info;
  if (!next_alloc || !::dladdr(next_alloc, &info) ||
      std::strstr(info.dli_fname, "libgpuleak_interposer.so") == nullptr) {
    std::fprintf(stderr, "driver_child: RTLD_NEXT cuMemAlloc_v2 is in %s\n",
                 next_alloc && ::dladdr(next_alloc, &info) ? info.dli_fname : "nothing");
    return 5;
  }
  void* next_getenv = ::dlsym(RTLD_NEXT, "getenv");
  if (next_getenv != reinterpret_cast<void*>(&getenv)) {
    std::fprintf(stderr, "driver_child: RTLD_NEXT getenv is not libc's\n");
    return 6;
  }
  (void)interposer;
  std::printf("rtld-next ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "events") return events(nullptr);
  if (mode == "events-another-cupti-client" && argc > 2) return events(argv[2]);
  if (mode == "rtld-next") return rtld_next();
  if (mode == "graphs-kept" || mode == "graphs-destroyed")
    return graphs(mode == "graphs-destroyed");
  if (mode == "bench" && argc > 4)
    return bench(std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]), std::atoi(argv[4]));
  std::fprintf(stderr, "usage: driver_child events|events-another-cupti-client CUPTI|rtld-next\n");
  return 2;
}
