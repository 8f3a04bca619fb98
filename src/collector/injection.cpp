// Entry points of libgpuleak_collector.so: InitializeInjection (called by
// the CUDA driver during cuInit when CUDA_INJECTION64_PATH names this
// library) and the C API of include/gpuleak/collector_api.h.
//
// Every entry point catches everything: nothing may escape into the
// program that loaded us.
#include <algorithm>
#include <mutex>

#include "collector/capture_backend.h"
#include "collector/config.h"
#include "collector/diagnostics.h"
#include "collector/lent_python_stack.h"
#include "collector/python_frames.h"
#include "collector/recorder.h"
#include "gpuleak/collector_api.h"

namespace gpuleak::collector {
namespace {

// API ids of events that do not come from the CUDA driver.
constexpr std::uint32_t kApiTorchAlloc = 0x10001;
constexpr std::uint32_t kApiTorchFree = 0x10002;

std::once_flag g_config_once;
Config g_config;

const Config& config() {
  std::call_once(g_config_once, [] {
    g_config = read_config_from_environment();
    set_verbose(g_config.verbose);
  });
  return g_config;
}

Recorder* start_recorder() {
  const Config& c = config();
  if (c.disabled) return nullptr;
  Recorder* recorder = Recorder::start(c);
  if (recorder) {
    static std::once_flag names_once;
    std::call_once(names_once, [recorder] {
      recorder->record_api_name(kApiTorchAlloc, "torch.caching_allocator.alloc");
      recorder->record_api_name(kApiTorchFree, "torch.caching_allocator.free_requested");
    });
  }
  return recorder;
}

}  // namespace
}  // namespace gpuleak::collector

using namespace gpuleak::collector;
using gpuleak::trace::MemoryKind;
using gpuleak::trace::Metric;
using gpuleak::trace::StepSource;

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    Recorder* recorder = start_recorder();
    if (!recorder) return 1;
    std::string why;
    auto backend = make_cupti_backend();
    if (!backend->start(*recorder, &why)) {
      disable_collector("%s", why.c_str());
      return 1;
    }
    backend.release();  // lives as long as the process
  } catch (...) {
    disable_collector("unexpected error during start-up");
  }
  return 1;
}

extern "C" __attribute__((visibility("default"))) const char* gpuleak_collector_version(void) {
  return "0.1.0";
}

extern "C" __attribute__((visibility("default"))) int gpuleak_is_recording(void) {
  return Recorder::get() != nullptr;
}

extern "C" __attribute__((visibility("default"))) int gpuleak_start_recording(void) {
  try {
    return start_recorder() != nullptr;
  } catch (...) {
    disable_collector("unexpected error during start-up");
    return 0;
  }
}

namespace {
template <class F>
void guarded(F&& f) {
  try {
    if (Recorder* r = Recorder::get()) f(*r);
  } catch (...) {
    disable_collector("internal error in the collector API");
  }
}
}  // namespace

namespace {
// Sources a program may report; the analysis derives the others.
bool reportable_step_source(int source) {
  return source >= static_cast<int>(StepSource::kOptimizerHook) &&
         source <= static_cast<int>(StepSource::kDataLoader) &&
         source != static_cast<int>(StepSource::kTimeWindow);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void gpuleak_mark_step(uint64_t step,
                                                                         int source) {
  gpuleak_mark_clock_step(step, source, 0, 1);
}

extern "C" __attribute__((visibility("default"))) void gpuleak_mark_clock_step(uint64_t step,
                                                                               int source,
                                                                               uint32_t clock,
                                                                               int pacing) {
  if (!reportable_step_source(source)) source = static_cast<int>(StepSource::kExplicit);
  guarded([&](Recorder& r) {
    r.record_step(step, static_cast<StepSource>(source), clock, pacing != 0);
  });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_sample(int metric, int device,
                                                                             uint64_t value) {
  if (metric < 1 || metric > 7) return;
  guarded([&](Recorder& r) { r.record_sample(static_cast<Metric>(metric), device, value); });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_annotate(const char* key,
                                                                        const char* value) {
  if (!key || !value) return;
  guarded([&](Recorder& r) { r.record_annotation(key, value); });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_torch_alloc(uint64_t address,
                                                                                  uint64_t size,
                                                                                  int device,
                                                                                  uint64_t stream) {
  guarded([&](Recorder& r) {
    r.record_alloc(address, size, MemoryKind::kTorchBlock, kApiTorchAlloc, device, stream,
                   /*with_native=*/false);
  });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_torch_free(uint64_t address,
                                                                                 int device) {
  guarded([&](Recorder& r) {
    r.record_free(r.next_seq(), address, MemoryKind::kTorchBlock, kApiTorchFree, device);
  });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_set_python_frame_reader(
    void* frames, void* line, void* code_info) {
  try {
    PythonFrameReader reader;
    reader.frames = reinterpret_cast<decltype(reader.frames)>(frames);
    reader.line = reinterpret_cast<decltype(reader.line)>(line);
    reader.code_info = reinterpret_cast<decltype(reader.code_info)>(code_info);
    set_python_frame_reader(reader);
  } catch (...) {
    disable_collector("internal error while registering the Python frame reader");
  }
}

extern "C" __attribute__((visibility("default"))) void gpuleak_lend_python_stack(int lend) {
  try {
    if (lend) {
      lend_python_stack(python_frame_reader());
    } else {
      end_python_stack_loan();
    }
  } catch (...) {
    disable_collector("internal error while lending a Python stack");
  }
}

extern "C" __attribute__((visibility("default"))) int gpuleak_take_growth_candidates(
    uint32_t* site_ids, uint32_t* allocation_counts, uint64_t* allocations, int max_sites,
    int max_allocations) {
  int filled = 0;
  guarded([&](Recorder& r) {
    if (!site_ids || !allocation_counts || !allocations || max_sites <= 0 || max_allocations <= 0)
      return;
    for (const GrowthCandidate& c : r.take_growth_candidates()) {
      if (filled == max_sites) break;
      site_ids[filled] = c.stack_id;
      std::size_t n =
          std::min<std::size_t>(c.allocations.size(), static_cast<std::size_t>(max_allocations));
      allocation_counts[filled] = static_cast<uint32_t>(n);
      uint64_t* row = allocations + static_cast<std::size_t>(filled) *
                                        static_cast<std::size_t>(max_allocations) * 2;
      for (std::size_t i = 0; i < n; ++i) {
        row[2 * i] = c.allocations[i].first;
        row[2 * i + 1] = c.allocations[i].second;
      }
      ++filled;
    }
  });
  return filled;
}

extern "C" __attribute__((visibility("default"))) void gpuleak_flush(void) {
  guarded([](Recorder& r) { r.flush(); });
}
