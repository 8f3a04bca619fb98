#include "collector/config.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "collector/native_unwinder.h"
#include "trace/bounded_trace_writer.h"

namespace gpuleak::collector {

namespace {

bool flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "no") == 0);
}

int number(const char* name, int fallback, int low, int high) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long parsed = std::strtol(v, &end, 10);
  if (*end != '\0' || parsed < low || parsed > high) return fallback;
  return static_cast<int>(parsed);
}

// A byte count: digits, optionally followed by K, M or G (powers of 1024).
std::uint64_t byte_count(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long parsed = std::strtoull(v, &end, 10);
  if (end == v) return fallback;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift != 0) ++end;
  if (*end != '\0' || parsed > (UINT64_MAX >> shift)) return fallback;
  return static_cast<std::uint64_t>(parsed) << shift;
}

// GPULEAK_BENCH_SKIP: comma-separated names of BenchSkip parts.
unsigned bench_skip_parts(const char* v) {
  if (!v) return 0;
  static constexpr struct {
    const char* name;
    unsigned bit;
  } kParts[] = {{"seq", kBenchSkipSeq},
                {"clock", kBenchSkipClock},
                {"device", kBenchSkipDevice},
                {"stack_id", kBenchSkipStackId},
                {"buffer", kBenchSkipBuffer}};
  unsigned bits = 0;
  for (const auto& part : kParts) {
    std::size_t length = std::strlen(part.name);
    for (const char* at = std::strstr(v, part.name); at; at = std::strstr(at + 1, part.name)) {
      bool starts = at == v || at[-1] == ',';
      bool ends = at[length] == '\0' || at[length] == ',';
      if (starts && ends) bits |= part.bit;
    }
  }
  return bits;
}

}  // namespace

Config read_config_from_environment() {
  Config c;
  if (const char* dir = std::getenv("GPULEAK_TRACE_DIR"); dir && *dir) c.trace_dir = dir;
  c.native_depth = number("GPULEAK_NATIVE_DEPTH", c.native_depth, 0, kMaxNativeFrames);
  c.tensor_native_depth =
      std::min(c.native_depth,
               number("GPULEAK_TENSOR_NATIVE_DEPTH", c.tensor_native_depth, 0, kMaxNativeFrames));
  c.backward_native_stacks = flag("GPULEAK_BACKWARD_NATIVE_STACKS", c.backward_native_stacks);
  c.python_stacks = flag("GPULEAK_PYTHON_STACKS", c.python_stacks);
  c.native_with_python = flag("GPULEAK_NATIVE_WITH_PYTHON", c.native_with_python);
  c.reuse_stacks = flag("GPULEAK_REUSE_STACKS", c.reuse_stacks);
  c.flush_ms = number("GPULEAK_FLUSH_MS", c.flush_ms, 1, 60000);
  c.buffer_bytes = static_cast<std::size_t>(
      number("GPULEAK_BUFFER_BYTES", static_cast<int>(c.buffer_bytes), 64 << 10, 1 << 30));
  c.trace_max_bytes = byte_count("GPULEAK_TRACE_MAX_BYTES", c.trace_max_bytes);
  if (c.trace_max_bytes != 0)
    c.trace_max_bytes = std::max(c.trace_max_bytes, trace::BoundedTraceWriter::kMinBoundBytes);
  if (const char* lib = std::getenv("GPULEAK_CUPTI_LIBRARY"); lib && *lib) c.cupti_library = lib;
  if (const char* backend = std::getenv("GPULEAK_BACKEND"); backend && *backend)
    c.backend = backend;
  if (const char* clock = std::getenv("GPULEAK_CLOCK"); clock && *clock) c.clock = clock;
  c.verbose = flag("GPULEAK_VERBOSE", false);
  c.disabled = flag("GPULEAK_DISABLE", false);
  c.bench_skip = bench_skip_parts(std::getenv("GPULEAK_BENCH_SKIP"));
  return c;
}

}  // namespace gpuleak::collector
