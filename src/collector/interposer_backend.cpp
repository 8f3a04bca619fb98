// The interposer backend: attaches the recorder to libgpuleak_interposer.so
// (src/interposer/driver_interposer.c), which wraps the driver's entry
// points when `gpuleak run` preloads it. No CUPTI: a profiler, Nsight or
// another CUPTI client keeps CUPTI's subscription for itself, and no
// CUPTI dispatch is paid on any call.
//
// The interposer calls before_call (releases and context calls) and
// after_call on the calling thread, never re-entered on that thread.
// Starting twice is harmless: attaching again replaces the same hooks.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>

#include "collector/capture_backend.h"
#include "collector/diagnostics.h"
#include "collector/driver_api_table.h"
#include "collector/driver_call_events.h"
#include "collector/recorder.h"
#include "gpuleak/interposer_api.h"

namespace gpuleak::collector {

namespace {

using AttachFunction = int (*)(const GpuleakDriverHooks*);
using StateFunction = void (*)(GpuleakInterposerState*);

template <class F>
F interposer_function(const char* name) {
  // The interposer is preloaded, so it is in the global scope.
  return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

[[gnu::hot]] std::uint64_t before_call(std::uint32_t cbid, const void* params) {
  try {
    Recorder* recorder = Recorder::get();
    if (!recorder) return 0;
    ApiRole role = role_of(cbid);
    if (role == ApiRole::kRelease) return recorder->next_seq() + 1;  // 0: none taken
    if (role == ApiRole::kContext)
      record_context_call(*recorder, cbid, params, /*exit=*/false, CUDA_SUCCESS);
  } catch (...) {
    disable_collector("internal error while recording a CUDA call");
  }
  return 0;
}

[[gnu::hot]] void after_call(std::uint32_t cbid, const void* params, int result,
                             std::uint64_t token) {
  try {
    Recorder* recorder = Recorder::get();
    if (!recorder) return;
    if (role_of(cbid) == ApiRole::kContext) {
      record_context_call(*recorder, cbid, params, /*exit=*/true, static_cast<CUresult>(result));
      return;
    }
    record_driver_call(*recorder, cbid, params, static_cast<CUresult>(result),
                       /*context=*/nullptr, token);
  } catch (...) {
    disable_collector("internal error while recording a CUDA call");
  }
}

const GpuleakDriverHooks kHooks = {sizeof(GpuleakDriverHooks), before_call, after_call};

// For the benchmarks only: hooks that return at once.
std::uint64_t before_nothing(std::uint32_t, const void*) { return 0; }
void after_nothing(std::uint32_t, const void*, int, std::uint64_t) {}
const GpuleakDriverHooks kEmptyHooks = {sizeof(GpuleakDriverHooks), before_nothing, after_nothing};

class InterposerBackend final : public CaptureBackend {
 public:
  const char* name() const override { return "interposer"; }

  StartResult start(Recorder& recorder, std::string* why) override {
    auto attach = interposer_function<AttachFunction>("gpuleak_interposer_attach");
    if (!attach) {
      *why = "libgpuleak_interposer.so is not preloaded (gpuleak run puts it in LD_PRELOAD)";
      return StartResult::kUnavailable;
    }
    for (const DriverApi& api : followed_driver_apis())
      recorder.record_api_name(api.cbid, api.name);
    if (!attach(&kHooks)) {
      *why = "libgpuleak_interposer.so is older than this collector";
      return StartResult::kFailed;
    }
    say_verbose("following %zu CUDA driver APIs through the preloaded interposer",
                followed_driver_apis().size());
    return StartResult::kStarted;
  }
};

}  // namespace

std::unique_ptr<CaptureBackend> make_interposer_backend() {
  return std::make_unique<InterposerBackend>();
}

InterposerPresence interposer_presence() {
  InterposerPresence presence;
  auto state = interposer_function<StateFunction>("gpuleak_interposer_state");
  if (!state) return presence;
  GpuleakInterposerState s{};
  s.struct_size = sizeof s;
  state(&s);
  presence.loaded = true;
  presence.loaded_before_driver = s.loaded_before_driver != 0;
  return presence;
}

}  // namespace gpuleak::collector

// For the CPU benchmark (tests/collector/driver_child.cpp bench) only, as
// gpuleak_benchmark_callbacks is for CUPTI: the interposer's wrappers with
// no collector attached (0), with hooks that return at once (1), and
// recording (2). Calls made in modes 0 and 1 are not in the trace. Returns 0,
// or -1 without the interposer.
extern "C" __attribute__((visibility("default"))) int gpuleak_benchmark_interposer(int mode) {
  using namespace gpuleak::collector;
  auto attach = interposer_function<AttachFunction>("gpuleak_interposer_attach");
  if (!attach) return -1;
  const GpuleakDriverHooks* hooks = mode == 0 ? nullptr : mode == 1 ? &kEmptyHooks : &kHooks;
  return attach(hooks) ? 0 : -1;
}
