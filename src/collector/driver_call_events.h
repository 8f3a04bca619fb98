// One followed CUDA driver call turned into recorder events, the same way
// for both capture backends: the API is named by its CUPTI callback id
// (cupti_driver_cbid.h) and its arguments come as the parameter struct
// CUPTI passes (generated_cuda_meta.h), which the interposer fills too.
//
// Allocations are recorded at API exit (pointer and result known). A
// release takes its sequence number before the driver runs (the backend
// calls Recorder::next_seq() then and passes seq + 1 as `release_token`)
// and is written at exit once the result is known.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>

#include "collector/context_devices.h"
#include "collector/native_unwinder.h"
#include "collector/recorder.h"
#include "trace/records.h"

namespace gpuleak::collector {

// What one allocation or release call is about.
struct Allocation {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  trace::MemoryKind kind = trace::MemoryKind::kDevice;
  std::uint64_t stream = 0;
  int device = -2;  // -2: take it from the context
};

// Reads the parameters of an allocating API. At API exit (`done`), the out
// pointers hold the result. False for any other API.
bool describe_allocation(std::uint32_t cbid, const void* params, bool done, Allocation* a);
// Reads the parameters of a releasing API. False for any other API.
bool describe_release(std::uint32_t cbid, const void* params, Allocation* a);

// A context creation, destruction, retain or release, at API entry or exit.
void record_context_call(Recorder& recorder, std::uint32_t cbid, const void* params, bool exit,
                         CUresult result);

// An allocation or release at API exit. `context`: the call's context, or
// null to ask for the calling thread's current one. Inlined into each
// backend's callback: the native stack is unwound from there, one frame
// fewer for the unwinder to walk.
[[gnu::always_inline]] inline void record_driver_call(Recorder& recorder, std::uint32_t cbid,
                                                      const void* params, CUresult result,
                                                      CUcontext context,
                                                      std::uint64_t release_token) {
  auto device_for = [context, &recorder, result](const Allocation& a) {
    if (a.device != -2) return a.device;
    if (recorder.config().bench_skip & kBenchSkipDevice) [[unlikely]]
      return -1;
    return context ? context_devices().device_of(context)
                   : context_devices().device_of_current_context(result == CUDA_SUCCESS);
  };
  Allocation a;
  if (describe_release(cbid, params, &a)) {
    if (release_token == 0) return;
    std::uint64_t seq = release_token - 1;
    if (result != CUDA_SUCCESS) {
      recorder.record_nothing(seq);
      return;
    }
    recorder.record_free(seq, a.address, a.kind, cbid, device_for(a));
    return;
  }
  if (describe_allocation(cbid, params, true, &a)) {
    int device = device_for(a);
    if (result == CUDA_SUCCESS) {
      // One call per tensor under PyTorch's cudaMallocAsync backend: keep it
      // cheap (Python frames only). Other driver allocations are rare.
      bool with_native = a.kind != trace::MemoryKind::kDeviceAsync;
      // Unwinding here, rather than inside the recorder, spares the unwinder
      // the recorder's frames: for a stream-ordered pair, which costs the
      // driver well under a microsecond, every frame shows.
      std::uint64_t frames[kMaxNativeFrames];
      StackTable::NativeFrames unwound;
      bool early = recorder.native_frames_wanted(with_native);
      if (early) {
        unwound.frames = frames;
        unwound.count =
            capture_native_stack(frames, std::min(recorder.config().native_depth, kMaxNativeFrames),
                                 &unwound.remembered);
      }
      recorder.record_alloc(a.address, a.size, a.kind, cbid, device, a.stream, with_native,
                            early ? &unwound : nullptr);
    } else {
      recorder.record_alloc_failed(a.size, a.kind, cbid, device,
                                   static_cast<std::uint32_t>(result));
    }
  }
}

}  // namespace gpuleak::collector
