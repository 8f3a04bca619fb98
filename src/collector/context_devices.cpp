#include "collector/context_devices.h"

#include <dlfcn.h>

namespace gpuleak::collector {

namespace {

template <class F>
F driver_function(const char* name) {
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  return driver ? reinterpret_cast<F>(::dlsym(driver, name)) : nullptr;
}

// cuCtxGetDevice for the current context (inside a driver call, the call's).
int ask_driver() {
  using GetDevice = CUresult (*)(CUdevice*);
  static GetDevice get_device = driver_function<GetDevice>("cuCtxGetDevice");
  CUdevice device = -1;
  if (!get_device || get_device(&device) != CUDA_SUCCESS) return -1;
  return device;
}

}  // namespace

void ContextDevices::remember(CUcontext context, int device) {
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

int ContextDevices::lookup(CUcontext context) {
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

bool ContextDevices::one_device() {
  int known = device_count_.load(std::memory_order_relaxed);
  if (known != kNotAsked) return known == kOne;
  // Asked inside a driver call, after cuInit: the count is fixed for the
  // process's life (CUDA_VISIBLE_DEVICES is read at cuInit). Threads racing
  // here ask twice and agree.
  using GetCount = CUresult (*)(int*);
  static GetCount get_count = driver_function<GetCount>("cuDeviceGetCount");
  int count = 0;
  bool one = get_count && get_count(&count) == CUDA_SUCCESS && count == 1;
  device_count_.store(one ? kOne : kOther, std::memory_order_relaxed);
  return one;
}

int ContextDevices::device_of_current_context(bool call_succeeded) {
  if (call_succeeded && one_device()) return 0;
  using GetCurrent = CUresult (*)(CUcontext*);
  static GetCurrent get_current = driver_function<GetCurrent>("cuCtxGetCurrent");
  CUcontext context = nullptr;
  if (!get_current || get_current(&context) != CUDA_SUCCESS) return -1;
  return device_of(context);
}

ContextDevices& context_devices() {
  static ContextDevices* devices = new ContextDevices();  // never destroyed: calls at exit
  return *devices;
}

}  // namespace gpuleak::collector
