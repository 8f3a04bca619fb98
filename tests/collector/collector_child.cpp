// The program the collector tests run as a child process: it loads
// libgpuleak_collector.so with dlopen (as the gpuleak Python package does),
// drives the recorder through the C API, and exits. It never needs a GPU.
//
//   collector_child COLLECTOR.so stress   8 threads x 100,000 alloc/free pairs, with
//                                         planted leaks: thread t leaks t+1 blocks of
//                                         4096 bytes from plant_leaks()
//   collector_child COLLECTOR.so hold N   records N leaked blocks and 5 steps, says
//                                         "recorded" on stdout, then waits to be killed
//   collector_child COLLECTOR.so fork N   forks N children while 3 threads record; each
//                                         child calls the API and exits; prints the
//                                         children's pids
//   collector_child COLLECTOR.so api      starts recording (twice), records a little,
//                                         prints what the API answered and a result
//   collector_child COLLECTOR.so clock N  N times, 200 ms apart: annotates
//                                         "monotonic_ns" with CLOCK_MONOTONIC read just
//                                         before (the record's own time must agree)
//   collector_child COLLECTOR.so inline   leaks 3 blocks from a helper inlined (always_inline)
//                                         into a function inlined into outer_caller()
//
// Built with -g and without optimization, so native stacks name plant_leaks().
#include <dlfcn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct CollectorApi {
  int (*start_recording)();
  int (*is_recording)();
  void (*mark_step)(std::uint64_t, int);
  void (*annotate)(const char*, const char*);
  void (*record_torch_alloc)(std::uint64_t, std::uint64_t, int, std::uint64_t);
  void (*record_torch_free)(std::uint64_t, int);
  void (*flush)();
};

CollectorApi api;

template <class F>
void find(void* library, F& slot, const char* name) {
  slot = reinterpret_cast<F>(::dlsym(library, name));
  if (!slot) {
    std::fprintf(stderr, "collector_child: %s is not exported\n", name);
    std::exit(90);
  }
}

void load(const char* path) {
  void* library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::fprintf(stderr, "collector_child: %s\n", ::dlerror());
    std::exit(91);
  }
  find(library, api.start_recording, "gpuleak_start_recording");
  find(library, api.is_recording, "gpuleak_is_recording");
  find(library, api.mark_step, "gpuleak_mark_step");
  find(library, api.annotate, "gpuleak_annotate");
  find(library, api.record_torch_alloc, "gpuleak_record_torch_alloc");
  find(library, api.record_torch_free, "gpuleak_record_torch_free");
  find(library, api.flush, "gpuleak_flush");
}

// Distinct address ranges per thread and purpose, so no two live blocks share
// an address (as in a real allocator).
std::uint64_t range(int thread, int purpose) {
  return (static_cast<std::uint64_t>(thread + 1) << 40) |
         (static_cast<std::uint64_t>(purpose) << 36);
}
constexpr int kDistinct = 1, kReused = 2, kLeaked = 3;

std::atomic<int> g_sink{0};

// Every leaked block is allocated here: the tests look for this name in the
// symbolized native stacks.
__attribute__((noinline)) void plant_leaks(int thread, int blocks) {
  for (int k = 0; k < blocks; ++k) {
    api.record_torch_alloc(range(thread, kLeaked) + static_cast<std::uint64_t>(k) * 4096, 4096, 0,
                           0);
    g_sink.fetch_add(1);  // keeps the call above from being a tail call
  }
}

__attribute__((noinline)) void churn(int thread, int pairs) {
  for (int i = 0; i < pairs; ++i) {
    // Even iterations use a new address each time, odd ones reuse 8 addresses.
    std::uint64_t address = i % 2 == 0
                                ? range(thread, kDistinct) + static_cast<std::uint64_t>(i) * 256
                                : range(thread, kReused) + static_cast<std::uint64_t>(i % 8) * 256;
    api.record_torch_alloc(address, static_cast<std::uint64_t>(i % 7 + 1) * 512, 0, 7);
    if (i == pairs / 2) plant_leaks(thread, thread + 1);
    api.record_torch_free(address, 0);
  }
  g_sink.fetch_add(1);
}

int stress() {
  if (api.start_recording() != 1) return 10;
  constexpr int kThreads = 8, kPairs = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(churn, t, kPairs);
  for (auto& t : threads) t.join();
  std::uint64_t blocks = 0;
  for (int t = 0; t < kThreads; ++t) blocks += static_cast<std::uint64_t>(t + 1);
  std::printf("planted %llu blocks, %llu bytes\n", static_cast<unsigned long long>(blocks),
              static_cast<unsigned long long>(blocks * 4096));
  return 0;
}

int hold(int blocks) {
  if (api.start_recording() != 1) return 10;
  for (int step = 0; step < 5; ++step) {
    for (int k = 0; k < blocks / 5; ++k) {
      api.record_torch_alloc(range(0, kLeaked) + static_cast<std::uint64_t>(step * 1000 + k) * 64,
                             64, 0, 0);
    }
    api.mark_step(static_cast<std::uint64_t>(step), 2);
  }
  // No gpuleak_flush(): the writer thread must write this on its own.
  std::printf("recorded\n");
  std::fflush(stdout);
  for (;;) ::pause();
}

std::atomic<bool> g_stop{false};

void record_until_stopped(int thread) {
  int i = 0;
  while (!g_stop.load()) {
    std::uint64_t address = range(thread, kReused) + static_cast<std::uint64_t>(i++ % 64) * 256;
    api.record_torch_alloc(address, 256, 0, 0);
    api.record_torch_free(address, 0);
    // Paced, so that three threads recording flat out for the whole test do
    // not outrun the writer: past its buffer cap the collector drops events
    // (and counts them), which is not what this test is about.
    if (i % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// In a forked child: every API call must be a harmless no-op.
int forked_child(int index) {
  std::uint64_t marker = 0xC0000000ull + static_cast<std::uint64_t>(index) * 4096;
  api.record_torch_alloc(marker, 4096, 0, 0);
  api.record_torch_free(marker, 0);
  api.record_torch_alloc(marker + 1, 4096, 0, 0);
  api.mark_step(1000 + static_cast<std::uint64_t>(index), 2);
  api.annotate("forked_child", "{}");
  api.flush();
  int started = api.start_recording();
  int recording = api.is_recording();
  return started == 0 && recording == 0 ? 0 : 20;  // exit() runs the atexit handlers too
}

int fork_test(int children) {
  if (api.start_recording() != 1) return 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(record_until_stopped, t);
  int failures = 0;
  for (int c = 0; c < children; ++c) {
    pid_t pid = ::fork();
    if (pid < 0) return 11;
    if (pid == 0) std::exit(forked_child(c));
    std::printf("child %d\n", static_cast<int>(pid));
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  g_stop.store(true);
  for (auto& t : threads) t.join();
  // The parent still records after its children are gone.
  api.record_torch_alloc(0xD0000000ull, 8192, 0, 0);
  std::printf("failures %d\n", failures);
  return failures == 0 ? 0 : 12;
}

// Inlined even at -O0 (always_inline), so the native stack has one frame for
// all three functions and only the DWARF inline records tell them apart.
__attribute__((always_inline)) inline void inlined_helper(int k) {
  std::uint64_t address = 0x70000000 + static_cast<std::uint64_t>(k) * 4096;
  api.record_torch_alloc(address, 4096, 0, 0);  // MARK: inlined allocation
}

__attribute__((always_inline)) inline void inlined_middle(int k) {
  inlined_helper(k);  // MARK: inlined call
  g_sink.fetch_add(1);
}

__attribute__((noinline)) void outer_caller() {
  for (int k = 0; k < 3; ++k) inlined_middle(k);  // MARK: outer call
  g_sink.fetch_add(1);
}

int inline_test() {
  api.start_recording();
  outer_caller();
  api.flush();
  return 0;
}

int api_test() {
  int first = api.start_recording();
  int second = api.start_recording();
  std::printf("start=%d,%d recording=%d\n", first, second, api.is_recording());
  long sum = 0;
  for (int i = 0; i < 1000; ++i) {
    api.record_torch_alloc(0x1000 + static_cast<std::uint64_t>(i) * 64, 64, 0, 0);
    if (i % 2 == 0) api.record_torch_free(0x1000 + static_cast<std::uint64_t>(i) * 64, 0);
    sum += i;
  }
  api.mark_step(1, 2);
  api.annotate("key", "value");
  api.flush();
  std::printf("result %ld\n", sum);
  return 0;
}

int clock_test(int n) {
  api.start_recording();
  for (int i = 0; i < n; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    std::uint64_t ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
                       static_cast<std::uint64_t>(ts.tv_nsec);
    api.annotate("monotonic_ns", std::to_string(ns).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: collector_child COLLECTOR.so stress|hold N|fork N|api|clock N|inline\n");
    return 2;
  }
  load(argv[1]);
  std::string mode = argv[2];
  int n = argc > 3 ? std::atoi(argv[3]) : 0;
  if (mode == "stress") return stress();
  if (mode == "hold") return hold(n);
  if (mode == "fork") return fork_test(n);
  if (mode == "api") return api_test();
  if (mode == "inline") return inline_test();
  if (mode == "clock") return clock_test(n);
  std::fprintf(stderr, "collector_child: unknown mode %s\n", mode.c_str());
  return 2;
}
