// Entry points of libgpuleak_collector.so: InitializeInjection (called by
// the CUDA driver during cuInit when CUDA_INJECTION64_PATH names this
// library) and the C API of include/gpuleak/collector_api.h.
//
// Every entry point catches everything: nothing may escape into the
// program that loaded us.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

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
// Arrays of other frameworks' pools (gpuleak_record_array_alloc): framework
// f's allocation is kApiArrayBase + 2f, its free the id after.
constexpr std::uint32_t kApiArrayBase = 0x10010;
constexpr int kArrayFrameworks = 2;  // 1 CuPy, 2 JAX
const char* const kArrayApiNames[kArrayFrameworks][2] = {
    {"cupy.memory_pool.malloc", "cupy.memory_pool.free"}, {"jax.array", "jax.array_deleted"}};

std::once_flag g_config_once;
Config g_config;

const Config& config() {
  std::call_once(g_config_once, [] {
    g_config = read_config_from_environment();
    set_verbose(g_config.verbose);
  });
  return g_config;
}

std::string json_text(const std::string& text);

// The recorder that started, kept to note in its trace that the collector
// turned itself off (Recorder::get() answers nothing once it has).
std::atomic<Recorder*> g_started_recorder{nullptr};

void note_disabled_in_trace(const char* reason) {
  try {
    if (Recorder* r = g_started_recorder.load())
      r->record_annotation("collector_disabled", "{\"reason\": " + json_text(reason) + "}");
  } catch (...) {
  }
}

Recorder* start_recorder() {
  const Config& c = config();
  if (c.disabled) return nullptr;
  Recorder* recorder = Recorder::start(c);
  if (recorder) {
    g_started_recorder.store(recorder);
    set_disable_listener(note_disabled_in_trace);
    static std::once_flag names_once;
    std::call_once(names_once, [recorder] {
      recorder->record_api_name(kApiTorchAlloc, "torch.caching_allocator.alloc");
      recorder->record_api_name(kApiTorchFree, "torch.caching_allocator.free_requested");
      for (int f = 1; f <= kArrayFrameworks; ++f) {
        recorder->record_api_name(kApiArrayBase + 2 * f, kArrayApiNames[f - 1][0]);
        recorder->record_api_name(kApiArrayBase + 2 * f + 1, kArrayApiNames[f - 1][1]);
      }
    });
  }
  return recorder;
}

// ---- starting the capture backend, once per process ----------------------
//
// The driver calls InitializeInjection during cuInit. A second call in the
// same process -- the driver initializing again, another thread's cuInit
// racing the first, or a call made from inside the first start (CUPTI or
// a library it loads re-entering cuInit) -- must never start a second
// subscription: CUPTI would refuse it, naming gpuleak as the holder, and the
// collector would have turned itself off. It returns at once instead and is
// noted in the trace (capture_backend's start_requests).

std::mutex g_capture_mutex;
bool g_capture_decided = false;    // guarded by g_capture_mutex
std::string g_capture_annotation;  // guarded: the capture_backend annotation's fields
int g_capture_requests = 0;        // guarded
thread_local bool t_starting_capture = false;

std::string json_text(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

std::atomic<int> g_reentrant_requests{0};

// The capture_backend annotation: which backend, why, and how often a start
// was asked for (1 is the usual; more says the driver or a library called
// InitializeInjection again).
void annotate_capture(Recorder& recorder) {
  recorder.record_annotation(
      "capture_backend",
      "{" + g_capture_annotation + ", \"start_requests\": " + std::to_string(g_capture_requests) +
          ", \"reentrant_start_requests\": " + std::to_string(g_reentrant_requests.load()) + "}");
}

// Starts `backend`; on success keeps it for the life of the process.
StartResult try_backend(std::unique_ptr<CaptureBackend> backend, Recorder& recorder,
                        std::string* why) {
  StartResult result = backend->start(recorder, why);
  // A started backend lives as long as the process: it is never deleted.
  if (result == StartResult::kStarted) (void)backend.release();
  return result;
}

void choose_and_start(Recorder& recorder) {
  const std::string& wanted = config().backend;
  InterposerPresence interposer = interposer_presence();
  std::string why, cupti_why;
  auto started = [&](const char* name, const std::string& reason) {
    g_capture_annotation = "\"name\": \"" + std::string(name) +
                           "\", \"reason\": " + json_text(reason) +
                           ", \"interposer_loaded\": " + (interposer.loaded ? "true" : "false") +
                           ", \"interposer_loaded_before_driver\": " +
                           (interposer.loaded_before_driver ? "true" : "false");
    say_verbose("capture backend: %s (%s)", name, reason.c_str());
  };
  if (wanted == "interposer") {
    if (try_backend(make_interposer_backend(), recorder, &why) == StartResult::kStarted) {
      started("interposer", "GPULEAK_BACKEND=interposer");
      return;
    }
    disable_collector("%s", why.c_str());
    return;
  }
  if (wanted != "cupti" && wanted != "auto") {
    disable_collector("GPULEAK_BACKEND=%s is not one of auto, cupti, interposer", wanted.c_str());
    return;
  }
  // auto: the interposer when it saw every entry point the program got (it
  // is cheaper and leaves CUPTI to profilers); CUPTI otherwise, since it
  // sees calls however they were reached.
  if (wanted == "auto" && interposer.loaded && interposer.loaded_before_driver) {
    if (try_backend(make_interposer_backend(), recorder, &why) == StartResult::kStarted) {
      started("interposer", "preloaded before the CUDA driver: every entry point goes through it");
      return;
    }
  }
  StartResult cupti = try_backend(make_cupti_backend(), recorder, &cupti_why);
  if (cupti == StartResult::kStarted) {
    started("cupti", wanted == "cupti" ? "GPULEAK_BACKEND=cupti"
                     : interposer.loaded
                         ? "the interposer was loaded after the CUDA driver and may miss calls"
                         : "no interposer preloaded");
    return;
  }
  if (wanted == "auto" && cupti == StartResult::kHeldByAnotherClient && interposer.loaded) {
    if (try_backend(make_interposer_backend(), recorder, &why) == StartResult::kStarted) {
      started("interposer", cupti_why);
      return;
    }
  }
  disable_collector("%s", cupti_why.c_str());
}

void start_capture() {
  if (t_starting_capture) {
    // Re-entered from inside the start below, on this thread: that start
    // finishes the job. (Taking the mutex here would deadlock.)
    say_verbose("InitializeInjection re-entered while the capture backend starts; ignored");
    g_reentrant_requests.fetch_add(1);
    return;
  }
  std::lock_guard<std::mutex> lock(g_capture_mutex);
  ++g_capture_requests;
  Recorder* recorder = start_recorder();
  if (!recorder) return;
  if (g_capture_decided) {
    say_verbose(
        "InitializeInjection called again (request %d); the capture backend already "
        "started",
        g_capture_requests);
    if (!g_capture_annotation.empty()) annotate_capture(*recorder);
    return;
  }
  g_capture_decided = true;
  t_starting_capture = true;
  try {
    choose_and_start(*recorder);
  } catch (...) {
    t_starting_capture = false;
    throw;
  }
  t_starting_capture = false;
  if (!g_capture_annotation.empty()) annotate_capture(*recorder);
}

}  // namespace
}  // namespace gpuleak::collector

using namespace gpuleak::collector;
using gpuleak::trace::MemoryKind;
using gpuleak::trace::Metric;
using gpuleak::trace::StepSource;

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    start_capture();
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
  return (source >= static_cast<int>(StepSource::kOptimizerHook) &&
          source <= static_cast<int>(StepSource::kDataLoader) &&
          source != static_cast<int>(StepSource::kTimeWindow)) ||
         source == static_cast<int>(StepSource::kPythonLoop);
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

namespace {
// gpuleak_benchmark_tensor_recording's switch: tensor events are dropped at
// the door while it is set.
std::atomic<bool> g_benchmark_skip_tensors{false};
}  // namespace

// For bench/torch/step_time.py only (not in the public header): times the
// parts of tensor recording inside one process, where the step time of a
// launch-bound loop alternates by 10 % between processes. Mode 0: tensor
// events are not recorded (the caller's trace path alone); 1: recorded
// without stacks; 2: with Python frames only; 3: as normal. The trace of a
// run that used it is not a faithful one: never use this outside a benchmark.
// Returns 0, or -1 when nothing records.
extern "C" __attribute__((visibility("default"))) int gpuleak_benchmark_tensor_recording(int mode) {
  using gpuleak::collector::StackTable;
  if (mode < 0 || mode > 3) return -1;
  int result = -1;
  guarded([&](Recorder& r) {
    g_benchmark_skip_tensors.store(mode == 0, std::memory_order_relaxed);
    r.stacks_for_benchmark().set_tensor_stacks_for_benchmark(
        mode == 1   ? StackTable::TensorStacks::kNone
        : mode == 2 ? StackTable::TensorStacks::kPythonOnly
                    : StackTable::TensorStacks::kFull);
    result = 0;
  });
  return result;
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_torch_alloc(uint64_t address,
                                                                                  uint64_t size,
                                                                                  int device,
                                                                                  uint64_t stream) {
  if (g_benchmark_skip_tensors.load(std::memory_order_relaxed)) return;
  guarded([&](Recorder& r) {
    r.record_alloc(address, size, MemoryKind::kTorchBlock, kApiTorchAlloc, device, stream,
                   /*with_native=*/false);
  });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_torch_alloc_in_node(
    uint64_t address, uint64_t size, int device, uint64_t stream, uint64_t node_type) {
  if (g_benchmark_skip_tensors.load(std::memory_order_relaxed)) return;
  guarded([&](Recorder& r) {
    if (node_type == 0 || r.config().backward_native_stacks) {
      r.record_alloc(address, size, MemoryKind::kTorchBlock, kApiTorchAlloc, device, stream,
                     /*with_native=*/false);
      return;
    }
    // The node's type stands for the native stack (its one frame symbolizes
    // to the node's class): unwinding the engine thread's 24 frames cost a
    // tenth of a launch-bound training step.
    const std::uint64_t frames[1] = {node_type};
    const StackTable::NativeFrames node{frames, 1, {}};
    r.record_alloc(address, size, MemoryKind::kTorchBlock, kApiTorchAlloc, device, stream,
                   /*with_native=*/false, &node);
  });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_torch_free(uint64_t address,
                                                                                 int device) {
  if (g_benchmark_skip_tensors.load(std::memory_order_relaxed)) return;
  guarded([&](Recorder& r) {
    r.record_free(r.next_seq(), address, MemoryKind::kTorchBlock, kApiTorchFree, device);
  });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_array_alloc(
    uint64_t address, uint64_t size, int device, uint64_t stream, int framework) {
  if (framework < 1 || framework > kArrayFrameworks) return;
  guarded([&](Recorder& r) {
    r.record_alloc(address, size, MemoryKind::kTorchBlock,
                   kApiArrayBase + 2 * static_cast<std::uint32_t>(framework), device, stream,
                   /*with_native=*/false);
  });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_record_array_free(uint64_t address,
                                                                                 int device,
                                                                                 int framework) {
  if (framework < 1 || framework > kArrayFrameworks) return;
  guarded([&](Recorder& r) {
    r.record_free(r.next_seq(), address, MemoryKind::kTorchBlock,
                  kApiArrayBase + 2 * static_cast<std::uint32_t>(framework) + 1, device);
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

// The program is ending: sites that grew at several steps, not in a row,
// become growth candidates for gpuleak_take_growth_candidates.
extern "C" __attribute__((visibility("default"))) void gpuleak_growth_candidates_at_exit(void) {
  guarded([](Recorder& r) { r.growth_candidates_at_exit(); });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_mark_growth_boundary(
    int index_driver_allocations) {
  guarded([&](Recorder& r) { r.mark_growth_boundary(index_driver_allocations != 0); });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_growth_tick(
    int index_driver_allocations) {
  gpuleak_mark_growth_boundary(index_driver_allocations);
}

extern "C" __attribute__((visibility("default"))) void gpuleak_flush(void) {
  guarded([](Recorder& r) { r.flush(); });
}

extern "C" __attribute__((visibility("default"))) void gpuleak_stop_recording(void) {
  try {
    if (Recorder* r = g_started_recorder.load()) r->stop_recording();
  } catch (...) {
    disable_collector("internal error while stopping the recorder");
  }
}
