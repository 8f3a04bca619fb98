// The collector's own cost per allocate/free pair, without CUDA: drives the
// recorder through its C API (the path PyTorch's allocator hook takes), with
// native stack capture, from a call chain of known depth. Prints JSON:
// nanoseconds per pair with the collector recording, and with it disabled
// (GPULEAK_DISABLE=1 in a second run gives the baseline of the calls alone).
//
// usage: collector_api_pairs LIBGPULEAK_COLLECTOR [PAIRS] [DEPTH]
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

using AllocFn = void (*)(std::uint64_t, std::uint64_t, int, std::uint64_t);
using FreeFn = void (*)(std::uint64_t, int);
using StartFn = int (*)();

static AllocFn g_alloc;
static FreeFn g_free;

// A call chain `depth` frames deep, so stacks look like a real program's.
__attribute__((noinline)) static std::uint64_t nest(int depth, std::uint64_t pairs) {
  if (depth > 0) return nest(depth - 1, pairs) + 1;
  for (std::uint64_t i = 0; i < pairs; ++i) {
    std::uint64_t address = 0x100000 + (i & 1023) * 4096;
    g_alloc(address, 4096, 0, 0);
    g_free(address, 0);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::uint64_t pairs = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
  int depth = argc > 3 ? std::atoi(argv[3]) : 12;
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  g_alloc = reinterpret_cast<AllocFn>(dlsym(lib, "gpuleak_record_torch_alloc"));
  g_free = reinterpret_cast<FreeFn>(dlsym(lib, "gpuleak_record_torch_free"));
  auto start_recording = reinterpret_cast<StartFn>(dlsym(lib, "gpuleak_start_recording"));
  int recording = start_recording();
  nest(depth, 10000);  // warm up: stack table, unwinder cache
  auto begin = std::chrono::steady_clock::now();
  nest(depth, pairs);
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count();
  std::printf("{\"recording\": %d, \"pairs\": %llu, \"depth\": %d, \"ns_per_pair\": %.1f}\n",
              recording, static_cast<unsigned long long>(pairs), depth,
              ns / static_cast<double>(pairs));
  return 0;
}
