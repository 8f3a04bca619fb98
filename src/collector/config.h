// The collector's settings, read once from the environment at start.
// `gpuleak run` sets them; each has one line of documentation in
// docs/collector.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpuleak::collector {

// Parts of the per-event work that GPULEAK_BENCH_SKIP leaves out, for the CPU
// benchmark's breakdown only (bench/run_interposer_pairs.py): a trace
// recorded with any of them is not a faithful one.
enum BenchSkip : unsigned {
  kBenchSkipSeq = 1u << 0,      // seq: events numbered 0, no shared counter
  kBenchSkipClock = 1u << 1,    // clock: events timed 0
  kBenchSkipDevice = 1u << 2,   // device: the device is not looked up (-1)
  kBenchSkipStackId = 1u << 3,  // stack_id: frames are taken, not hashed or looked up (id 0)
  kBenchSkipBuffer = 1u << 4,   // buffer: events are not put in the thread's buffer
};

struct Config {
  std::string trace_dir = "gpuleak-traces";  // GPULEAK_TRACE_DIR
  int native_depth = 64;  // GPULEAK_NATIVE_DEPTH: frames kept, 0 = no native stacks
  // GPULEAK_TENSOR_NATIVE_DEPTH: frames kept for a tensor allocated where no
  // Python frame is (autograd's backward threads), at most native_depth
  int tensor_native_depth = 24;
  // GPULEAK_BACKWARD_NATIVE_STACKS: a tensor allocated while an autograd node
  // runs its backward is named by that node alone (one frame, no unwinding);
  // with this set its native stack is unwound as for any thread without Python
  bool backward_native_stacks = false;
  bool python_stacks = true;  // GPULEAK_PYTHON_STACKS
  bool native_with_python =
      false;  // GPULEAK_NATIVE_WITH_PYTHON: native frames too when Python frames exist
  bool reuse_stacks = true;  // GPULEAK_REUSE_STACKS: reuse a stack unwound at the same place
  int flush_ms = 100;        // GPULEAK_FLUSH_MS: the longest data waits before it is written
  // GPULEAK_BUFFER_BYTES: a thread's waiting bytes beyond which its events
  // are dropped (and listed as lost); small values make drops happen, for tests.
  std::size_t buffer_bytes = 48u << 20;
  // GPULEAK_TRACE_MAX_BYTES: the most disk one process's trace takes; past
  // half of it the trace is compacted (trace/bounded_trace_writer.h). 0: no
  // bound. At least 16 MiB.
  std::uint64_t trace_max_bytes = kDefaultTraceMaxBytes;
  static constexpr std::uint64_t kDefaultTraceMaxBytes = 2ull << 30;
  std::string cupti_library;     // GPULEAK_CUPTI_LIBRARY: explicit libcupti path
  std::string backend = "auto";  // GPULEAK_BACKEND: auto, cupti or interposer (capture_backend.h)
  std::string clock = "auto";    // GPULEAK_CLOCK: auto, precise or coarse (collector/clock.h)
  bool verbose = false;          // GPULEAK_VERBOSE
  bool disabled = false;         // GPULEAK_DISABLE
  unsigned bench_skip = 0;       // GPULEAK_BENCH_SKIP: BenchSkip bits, benchmarks only
};

Config read_config_from_environment();

}  // namespace gpuleak::collector
