// The CUPTI callback backend: subscribes to the driver-API callbacks of
// every allocation and free, and hands each call to driver_call_events.h
// (a release's sequence number is taken in its entry callback).
//
// Starting twice is harmless: a second start() in a process whose
// subscription exists returns true without asking CUPTI again.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "collector/capture_backend.h"
#include "collector/cupti_library.h"
#include "collector/diagnostics.h"
#include "collector/driver_api_table.h"
#include "collector/driver_call_events.h"
#include "collector/native_unwinder.h"
#include "collector/recorder.h"

namespace gpuleak::collector {

namespace {

thread_local bool t_inside_callback = false;

// GPULEAK_EMPTY_CALLBACKS=1: subscribe but record nothing, to measure what
// CUPTI's callbacks cost by themselves (bench/run_collector_overhead.py).
// gpuleak_benchmark_callbacks() below switches it at run time.
std::atomic<bool> g_empty_callbacks{false};

// The subscription, kept for gpuleak_benchmark_callbacks().
CuptiFunctions g_cupti;
CUpti_SubscriberHandle g_subscriber = nullptr;
std::mutex g_subscription_mutex;

// CUPTI reports a holder as "CUPTI for <name>".
constexpr const char* kSubscriberName = "gpuleak";

[[gnu::hot]] void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                       const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  // Entry callbacks do little or nothing: an allocation's nothing, a
  // release's only take its sequence number (before the driver can hand the
  // address to someone else). Both return before touching more of our own
  // state than that, which the driver's work has pushed out of the caches.
  ApiRole role = role_of(cbid);
  if (cb->callbackSite == CUPTI_API_ENTER && role != ApiRole::kContext) {
    if (role != ApiRole::kRelease || g_empty_callbacks.load(std::memory_order_relaxed)) return;
    Recorder* recorder = Recorder::get();
    // +1 so that 0 means "no sequence number taken". None inside our own
    // callback: its exit is not recorded, and a number taken would never
    // come (readers would see a gap).
    if (recorder && cb->correlationData && !t_inside_callback)
      *cb->correlationData = recorder->next_seq() + 1;
    return;
  }
  if (g_empty_callbacks.load(std::memory_order_relaxed) || t_inside_callback) return;
  Recorder* recorder = Recorder::get();
  if (!recorder) return;
  t_inside_callback = true;
  try {
    CUresult result =
        cb->functionReturnValue ? *static_cast<CUresult*>(cb->functionReturnValue) : CUDA_SUCCESS;
    if (role == ApiRole::kContext) {
      record_context_call(*recorder, cbid, cb->functionParams, cb->callbackSite == CUPTI_API_EXIT,
                          result);
    } else {
      record_driver_call(*recorder, cbid, cb->functionParams, result, cb->context,
                         cb->correlationData ? *cb->correlationData : 0);
    }
  } catch (...) {
    disable_collector("internal error while recording a CUDA call");
  }
  t_inside_callback = false;
}

// Switches the callbacks of every followed API on or off. Returns the API
// that CUPTI refused, or nullptr.
const DriverApi* enable_followed_callbacks(const CuptiFunctions& cupti,
                                           CUpti_SubscriberHandle subscriber, bool enable) {
  for (const DriverApi& api : followed_driver_apis()) {
    if (cupti.enable_callback(enable ? 1 : 0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, api.cbid) !=
        CUPTI_SUCCESS)
      return &api;
  }
  return nullptr;
}

class CuptiBackend final : public CaptureBackend {
 public:
  const char* name() const override { return "cupti"; }

  StartResult start(Recorder& recorder, std::string* why) override {
    {
      // A second start in this process (the driver initializing the
      // injection again, another thread): the subscription stands.
      std::lock_guard<std::mutex> lock(g_subscription_mutex);
      if (g_subscriber) return StartResult::kStarted;
    }
    const char* empty = std::getenv("GPULEAK_EMPTY_CALLBACKS");
    g_empty_callbacks.store(empty && std::string(empty) == "1");
    CuptiFunctions cupti;
    if (!load_cupti(recorder.config().cupti_library, &cupti, why)) return StartResult::kUnavailable;
    CUpti_SubscriberHandle subscriber = nullptr;
    CUptiResult result;
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
    if (cupti.subscribe_v2) {
      CUpti_SubscriberParams params{};
      params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
      params.subscriberName = kSubscriberName;
      params.oldSubscriberName = holder;
      params.oldSubscriberSize = sizeof holder;
      result = cupti.subscribe_v2(&subscriber, on_callback, nullptr, &params);
    } else {
      result = cupti.subscribe(&subscriber, on_callback, nullptr);
    }
    if (result != CUPTI_SUCCESS) {
      const char* text = "unknown error";
      if (cupti.result_string) cupti.result_string(result, &text);
      if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        holder[sizeof holder - 1] = '\0';
        if (std::string(holder).find(kSubscriberName) != std::string::npos) {
          // CUPTI names us: another copy of this library in the process
          // (loaded from a second path) subscribed first.
          *why = std::string(
                     "another copy of gpuleak's collector in this process already holds "
                     "the CUDA callbacks (") +
                 holder + ")";
        } else {
          *why = std::string("another CUPTI client") +
                 (holder[0] ? std::string(" (") + holder + ")" : "") +
                 " already holds the CUDA callbacks (a profiler, Nsight or compute-sanitizer?)";
        }
        return StartResult::kHeldByAnotherClient;
      }
      *why = std::string("cuptiSubscribe failed: ") + text + " (" + cupti.path + ")";
      return StartResult::kFailed;
    }
    if (const DriverApi* failed = enable_followed_callbacks(cupti, subscriber, true)) {
      *why = std::string("cannot enable the CUPTI callback for ") + failed->name;
      cupti.unsubscribe(subscriber);
      return StartResult::kFailed;
    }
    for (const DriverApi& api : followed_driver_apis())
      recorder.record_api_name(api.cbid, api.name);
    say_verbose("following %zu CUDA driver APIs through %s", followed_driver_apis().size(),
                cupti.path.c_str());
    std::lock_guard<std::mutex> lock(g_subscription_mutex);
    g_cupti = cupti;
    g_subscriber = subscriber;
    return StartResult::kStarted;
  }
};

}  // namespace

std::unique_ptr<CaptureBackend> make_cupti_backend() { return std::make_unique<CuptiBackend>(); }

}  // namespace gpuleak::collector

// For bench/cuda/alloc_pairs only (not in the public header): compares, in
// one process, the allocation calls with CUPTI's callbacks off (0), on but
// returning at once (1), and recording (2). Across processes the native
// async pair alternated between 0.68 and 1.2 us on the H200 machine, more
// than the collector's own cost, so only a comparison inside one process
// measures that cost. Events made while callbacks are off are not in the
// trace: never use this outside a benchmark. Returns 0, or -1 when the
// collector is not subscribed.
extern "C" __attribute__((visibility("default"))) int gpuleak_benchmark_callbacks(int mode) {
  using namespace gpuleak::collector;
  try {
    std::lock_guard<std::mutex> lock(g_subscription_mutex);
    if (!g_subscriber || !g_cupti.enable_callback) return -1;
    if (enable_followed_callbacks(g_cupti, g_subscriber, mode != 0)) return -1;
    g_empty_callbacks.store(mode == 1);
    return 0;
  } catch (...) {
    return -1;
  }
}
