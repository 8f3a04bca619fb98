// Finds and loads libcupti at run time. CUPTI is never linked: its location
// differs between a CUDA toolkit, a driver-only machine and PyTorch's pip
// wheels (nvidia/*/lib), and a missing CUPTI must not stop the program.
//
// Search order (first that loads wins):
//   1. GPULEAK_CUPTI_LIBRARY (an explicit path);
//   2. a libcupti already loaded in the process (e.g. by a profiler);
//   3. next to a loaded libcudart, and in the nvidia/* pip package folders
//      beside any loaded library from site-packages (PyTorch's wheels);
//   4. the dynamic loader's own search ("libcupti.so.13", ".12", "libcupti.so");
//   5. CUDA toolkit folders under /usr/local/cuda*.
#pragma once

#include <cupti.h>

#include <string>
#include <vector>

namespace gpuleak::collector {

struct CuptiFunctions {
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                              CUpti_SubscriberParams*) = nullptr;  // optional (CUDA 13+)
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                 CUpti_CallbackId) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
  std::string path;  // the file that was loaded
};

// The candidate paths, in search order (for diagnostics and tests).
std::vector<std::string> cupti_candidates(const std::string& explicit_path);

// Loads the first candidate that works. On failure returns false and says
// what was tried in `error`.
bool load_cupti(const std::string& explicit_path, CuptiFunctions* out, std::string* error);

}  // namespace gpuleak::collector
