// The CUPTI callback backend: subscribes to the driver-API callbacks of
// every allocation and free, and turns each call into a recorder event.
//
// Allocations are recorded at API exit (when the pointer and result are
// known). Frees take their sequence number at API entry, before the driver
// can hand the address to someone else, and are written at exit once the
// result is known.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "collector/array_size.h"
#include "collector/capture_backend.h"
#include "collector/cupti_library.h"
#include "collector/diagnostics.h"
#include "collector/driver_api_table.h"
#include "collector/native_unwinder.h"
#include "collector/recorder.h"

namespace gpuleak::collector {

namespace {

using trace::ContextAction;
using trace::MemoryKind;

thread_local bool t_inside_callback = false;

// GPULEAK_EMPTY_CALLBACKS=1: subscribe but record nothing, to measure what
// CUPTI's callbacks cost by themselves (bench/run_collector_overhead.py).
// gpuleak_benchmark_callbacks() below switches it at run time.
std::atomic<bool> g_empty_callbacks{false};

// The subscription, kept for gpuleak_benchmark_callbacks().
CuptiFunctions g_cupti;
CUpti_SubscriberHandle g_subscriber = nullptr;
std::mutex g_subscription_mutex;

// Which device a context belongs to. Filled from context creation and
// primary-context retain; anything else is asked of the driver once.
class ContextDevices {
 public:
  void remember(CUcontext context, int device) {
    generation_.fetch_add(1, std::memory_order_relaxed);  // invalidates threads' cached answers
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : entries_) {
      if (entry.context == context || entry.context == nullptr) {
        entry = {context, device};
        return;
      }
    }
    entries_[next_victim_++ % kEntries] = {context, device};
  }

  [[gnu::hot]] int device_of(CUcontext context) {
    if (!context) return -1;
    // Nearly every call of a thread uses the same context: remember the last.
    thread_local CUcontext last_context = nullptr;
    thread_local int last_device = -1;
    thread_local unsigned last_generation = ~0u;
    unsigned generation = generation_.load(std::memory_order_relaxed);
    if (context == last_context && generation == last_generation) return last_device;
    int device = lookup(context);
    last_context = context;
    last_device = device;
    last_generation = generation;
    return device;
  }

 private:
  int lookup(CUcontext context) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& entry : entries_) {
        if (entry.context == context) return entry.device;
      }
    }
    int device = ask_driver();
    remember(context, device);
    return device;
  }

  static constexpr int kEntries = 64;
  struct Entry {
    CUcontext context = nullptr;
    int device = -1;
  };

  // cuCtxGetDevice for the current context (the callback's context is current).
  static int ask_driver() {
    using GetDevice = CUresult (*)(CUdevice*);
    static GetDevice get_device = [] {
      void* driver = ::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
      return driver ? reinterpret_cast<GetDevice>(::dlsym(driver, "cuCtxGetDevice")) : nullptr;
    }();
    CUdevice device = -1;
    if (!get_device || get_device(&device) != CUDA_SUCCESS) return -1;
    return device;
  }

  std::mutex mutex_;
  std::atomic<unsigned> generation_{0};
  Entry entries_[kEntries];
  unsigned next_victim_ = 0;
};

ContextDevices g_context_devices;

std::uint64_t array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR* d) {
  if (!d) return 0;
  return cuda_array_bytes(static_cast<unsigned>(d->Format), d->NumChannels, d->Width, d->Height,
                          d->Depth);
}

// What one allocation call produced.
struct Allocation {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  MemoryKind kind = MemoryKind::kDevice;
  std::uint64_t stream = 0;
  int device = -2;  // -2: take it from the context
};

// Reads the parameters of an allocating API. At API exit (`done`), the out
// pointers hold the result.
bool describe_allocation(CUpti_CallbackId cbid, const void* params, bool done, Allocation* a) {
  auto out_ptr = [done](const CUdeviceptr* p) -> std::uint64_t { return done && p ? *p : 0; };
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* p = static_cast<const cuMemAlloc_v2_params*>(params);
      *a = {out_ptr(p->dptr), p->bytesize, MemoryKind::kDevice};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      auto* p = static_cast<const cuMemAllocPitch_v2_params*>(params);
      std::uint64_t pitch = done && p->pPitch ? *p->pPitch : p->WidthInBytes;
      *a = {out_ptr(p->dptr), pitch * p->Height, MemoryKind::kDevice};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      auto* p = static_cast<const cuMemAllocManaged_params*>(params);
      *a = {out_ptr(p->dptr), p->bytesize, MemoryKind::kManaged};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      auto* p = static_cast<const cuMemAllocHost_v2_params*>(params);
      std::uint64_t address = done && p->pp ? reinterpret_cast<std::uintptr_t>(*p->pp) : 0;
      *a = {address, p->bytesize, MemoryKind::kHostPinned, 0, -1};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      auto* p = static_cast<const cuMemHostAlloc_params*>(params);
      std::uint64_t address = done && p->pp ? reinterpret_cast<std::uintptr_t>(*p->pp) : 0;
      *a = {address, p->bytesize, MemoryKind::kHostPinned, 0, -1};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      // The _ptsz variant has the same layout.
      auto* p = static_cast<const cuMemAllocAsync_params*>(params);
      *a = {out_ptr(p->dptr), p->bytesize, MemoryKind::kDeviceAsync,
            reinterpret_cast<std::uintptr_t>(p->hStream)};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      auto* p = static_cast<const cuMemAllocFromPoolAsync_params*>(params);
      *a = {out_ptr(p->dptr), p->bytesize, MemoryKind::kDeviceAsync,
            reinterpret_cast<std::uintptr_t>(p->hStream)};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* p = static_cast<const cuMemCreate_params*>(params);
      std::uint64_t handle = done && p->handle ? *p->handle : 0;
      int device = (p->prop && p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
                       ? p->prop->location.id
                       : -1;
      *a = {handle, p->size, MemoryKind::kVmmPhysical, 0, device};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      auto* p = static_cast<const cuMemMap_params*>(params);
      *a = {p->ptr, p->size, MemoryKind::kVmmMapping};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      auto* p = static_cast<const cuMemAddressReserve_params*>(params);
      *a = {out_ptr(p->ptr), p->size, MemoryKind::kAddressRange, 0, -1};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2: {
      auto* p = static_cast<const cuArrayCreate_v2_params*>(params);
      std::uint64_t handle = done && p->pHandle ? reinterpret_cast<std::uintptr_t>(*p->pHandle) : 0;
      std::uint64_t size = 0;
      if (p->pAllocateArray) {
        const auto* d = p->pAllocateArray;
        size = cuda_array_bytes(static_cast<unsigned>(d->Format), d->NumChannels, d->Width,
                                d->Height, 1);
      }
      *a = {handle, size, MemoryKind::kArray};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuArray3DCreate_v2: {
      auto* p = static_cast<const cuArray3DCreate_v2_params*>(params);
      std::uint64_t handle = done && p->pHandle ? reinterpret_cast<std::uintptr_t>(*p->pHandle) : 0;
      *a = {handle, array3d_bytes(p->pAllocateArray), MemoryKind::kArray};
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate: {
      // Size of the base level only (documented approximation).
      auto* p = static_cast<const cuMipmappedArrayCreate_params*>(params);
      std::uint64_t handle = done && p->pHandle ? reinterpret_cast<std::uintptr_t>(*p->pHandle) : 0;
      *a = {handle, array3d_bytes(p->pMipmappedArrayDesc), MemoryKind::kArray};
      return true;
    }
    default:
      return false;
  }
}

// Reads the parameters of a releasing API.
bool describe_release(CUpti_CallbackId cbid, const void* params, Allocation* a) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      *a = {static_cast<const cuMemFree_v2_params*>(params)->dptr, 0, MemoryKind::kDevice};
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      *a = {reinterpret_cast<std::uintptr_t>(static_cast<const cuMemFreeHost_params*>(params)->p),
            0, MemoryKind::kHostPinned, 0, -1};
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      *a = {static_cast<const cuMemFreeAsync_params*>(params)->dptr, 0, MemoryKind::kDeviceAsync};
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      *a = {static_cast<const cuMemRelease_params*>(params)->handle, 0, MemoryKind::kVmmPhysical};
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
      *a = {static_cast<const cuMemUnmap_params*>(params)->ptr, 0, MemoryKind::kVmmMapping};
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree:
      *a = {static_cast<const cuMemAddressFree_params*>(params)->ptr, 0, MemoryKind::kAddressRange,
            0, -1};
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy:
      *a = {reinterpret_cast<std::uintptr_t>(
                static_cast<const cuArrayDestroy_params*>(params)->hArray),
            0, MemoryKind::kArray};
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayDestroy:
      *a = {reinterpret_cast<std::uintptr_t>(
                static_cast<const cuMipmappedArrayDestroy_params*>(params)->hMipmappedArray),
            0, MemoryKind::kArray};
      return true;
    default:
      return false;
  }
}

void on_context_api(Recorder& recorder, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  bool exit = cb->callbackSite == CUPTI_API_EXIT;
  CUresult result =
      cb->functionReturnValue ? *static_cast<CUresult*>(cb->functionReturnValue) : CUDA_SUCCESS;
  auto created = [&](CUcontext* out, int device, ContextAction action) {
    if (!exit || result != CUDA_SUCCESS || !out) return;
    g_context_devices.remember(*out, device);
    recorder.record_context(action, reinterpret_cast<std::uintptr_t>(*out), device);
  };
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2: {
      auto* p = static_cast<const cuCtxCreate_v2_params*>(cb->functionParams);
      created(p->pctx, p->dev, ContextAction::kCreated);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3: {
      auto* p = static_cast<const cuCtxCreate_v3_params*>(cb->functionParams);
      created(p->pctx, p->dev, ContextAction::kCreated);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4: {
      auto* p = static_cast<const cuCtxCreate_v4_params*>(cb->functionParams);
      created(p->pctx, p->dev, ContextAction::kCreated);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain: {
      auto* p = static_cast<const cuDevicePrimaryCtxRetain_params*>(cb->functionParams);
      created(p->pctx, p->dev, ContextAction::kPrimaryRetained);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2: {
      if (exit) break;
      CUcontext context = static_cast<const cuCtxDestroy_v2_params*>(cb->functionParams)->ctx;
      recorder.record_context(ContextAction::kDestroyed, reinterpret_cast<std::uintptr_t>(context),
                              g_context_devices.device_of(context));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2: {
      if (exit) break;
      int device = static_cast<const cuDevicePrimaryCtxRelease_v2_params*>(cb->functionParams)->dev;
      recorder.record_context(ContextAction::kPrimaryReleased, 0, device);
      break;
    }
    default:
      break;
  }
}

// An allocation or release at API exit (on_callback took a release's
// sequence number at entry). Inlined into on_callback: one frame fewer for
// the unwinder to walk.
[[gnu::always_inline]] inline void handle_driver_api(Recorder& recorder, CUpti_CallbackId cbid,
                                                     const CUpti_CallbackData* cb) {
  Allocation a;
  if (describe_release(cbid, cb->functionParams, &a)) {
    if (!cb->correlationData || *cb->correlationData == 0) return;
    std::uint64_t seq = *cb->correlationData - 1;
    CUresult result = *static_cast<CUresult*>(cb->functionReturnValue);
    if (result != CUDA_SUCCESS) {
      recorder.record_nothing(seq);
      return;
    }
    int device = a.device == -2 ? g_context_devices.device_of(cb->context) : a.device;
    recorder.record_free(seq, a.address, a.kind, cbid, device);
    return;
  }
  if (describe_allocation(cbid, cb->functionParams, true, &a)) {
    CUresult result = *static_cast<CUresult*>(cb->functionReturnValue);
    int device = a.device == -2 ? g_context_devices.device_of(cb->context) : a.device;
    if (result == CUDA_SUCCESS) {
      // One call per tensor under PyTorch's cudaMallocAsync backend: keep it
      // cheap (Python frames only). Other driver allocations are rare.
      bool with_native = a.kind != MemoryKind::kDeviceAsync;
      // Unwinding here, rather than inside the recorder, spares the unwinder
      // the recorder's frames: for a stream-ordered pair, which costs the
      // driver well under a microsecond, every frame shows.
      std::uint64_t frames[kMaxNativeFrames];
      StackTable::NativeFrames unwound;
      bool early = recorder.native_frames_wanted(with_native);
      if (early) {
        unwound.frames = frames;
        unwound.count = capture_native_stack(
            frames, std::min(recorder.config().native_depth, kMaxNativeFrames));
      }
      recorder.record_alloc(a.address, a.size, a.kind, cbid, device, a.stream, with_native,
                            early ? &unwound : nullptr);
    } else {
      recorder.record_alloc_failed(a.size, a.kind, cbid, device,
                                   static_cast<std::uint32_t>(result));
    }
  }
}

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
    if (role == ApiRole::kContext) {
      on_context_api(*recorder, cbid, cb);
    } else {
      handle_driver_api(*recorder, cbid, cb);
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

  bool start(Recorder& recorder, std::string* why) override {
    const char* empty = std::getenv("GPULEAK_EMPTY_CALLBACKS");
    g_empty_callbacks.store(empty && std::string(empty) == "1");
    CuptiFunctions cupti;
    if (!load_cupti(recorder.config().cupti_library, &cupti, why)) return false;
    CUpti_SubscriberHandle subscriber = nullptr;
    CUptiResult result;
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
    if (cupti.subscribe_v2) {
      CUpti_SubscriberParams params{};
      params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
      params.subscriberName = "gpuleak";
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
        *why = std::string("another CUPTI client") +
               (holder[0] ? std::string(" (") + holder + ")" : "") +
               " already holds the CUDA callbacks (a profiler, Nsight or compute-sanitizer?)";
      } else {
        *why = std::string("cuptiSubscribe failed: ") + text + " (" + cupti.path + ")";
      }
      return false;
    }
    if (const DriverApi* failed = enable_followed_callbacks(cupti, subscriber, true)) {
      *why = std::string("cannot enable the CUPTI callback for ") + failed->name;
      cupti.unsubscribe(subscriber);
      return false;
    }
    for (const DriverApi& api : followed_driver_apis())
      recorder.record_api_name(api.cbid, api.name);
    say_verbose("following %zu CUDA driver APIs through %s", followed_driver_apis().size(),
                cupti.path.c_str());
    std::lock_guard<std::mutex> lock(g_subscription_mutex);
    g_cupti = cupti;
    g_subscriber = subscriber;
    return true;
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
