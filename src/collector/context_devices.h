// Which device a CUDA context belongs to, for both capture backends.
//
// Filled from context creation and primary-context retain; any other
// context is asked of the driver once (cuCtxGetDevice, with the context
// current, as it is inside a driver call). Thread-safe; each thread keeps
// its last answer, which later remember() calls invalidate.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>

namespace gpuleak::collector {

class ContextDevices {
 public:
  void remember(CUcontext context, int device);
  // -1 for no context or when the driver cannot say.
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
  // The device of the calling thread's current context (the interposer has
  // no context in hand), or -1. `call_succeeded`: the call being recorded
  // succeeded, so it had a context; where the process sees one device, that
  // context's device is 0 and the driver is not asked (two driver calls
  // less per allocate/free pair).
  int device_of_current_context(bool call_succeeded);

 private:
  int lookup(CUcontext context);
  // Whether the process sees exactly one device, asked of the driver once.
  bool one_device();

  enum DeviceCount : int { kNotAsked, kOne, kOther };
  std::atomic<int> device_count_{kNotAsked};

  static constexpr int kEntries = 64;
  struct Entry {
    CUcontext context = nullptr;
    int device = -1;
  };

  std::mutex mutex_;
  std::atomic<unsigned> generation_{0};
  Entry entries_[kEntries];
  unsigned next_victim_ = 0;
};

ContextDevices& context_devices();

}  // namespace gpuleak::collector
