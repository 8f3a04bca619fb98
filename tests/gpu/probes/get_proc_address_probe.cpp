// Probe for a design question (docs/collector.md, "What it costs"): does a
// CUDA injection library see the program's cuGetProcAddress calls for the
// stream-ordered allocation entry points? If the CUDA runtime looks them up
// after cuInit has loaded the injection library, a capture backend could hand
// out wrappers for them instead of paying CUPTI's dispatch. Loaded through
// CUDA_INJECTION64_PATH; prints, at exit, every symbol looked up after the
// subscription, with counts, and which memory entry points were among them.
//
// Build on the GPU machine:
//   g++ -O2 -shared -fPIC -I$CUDA/include -o probe.so get_proc_address_probe.cpp -ldl
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace {

std::mutex g_mutex;
std::map<std::string, int> g_symbols;
int g_driver_calls = 0;  // every driver API call seen, to show the subscription works

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId cbid, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_EXIT) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_driver_calls;
  }
  const char* symbol = nullptr;
  cuuint64_t flags = 0;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2) {
    auto* p = static_cast<const cuGetProcAddress_v2_params*>(cb->functionParams);
    symbol = p->symbol;
    flags = p->flags;
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress) {
    auto* p = static_cast<const cuGetProcAddress_params*>(cb->functionParams);
    symbol = p->symbol;
    flags = p->flags;
  }
  if (!symbol) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_symbols[std::string(symbol) +
              (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? " (ptds)" : "")];
}

void report() {
  std::lock_guard<std::mutex> lock(g_mutex);
  int total = 0;
  for (const auto& [name, count] : g_symbols) total += count;
  std::fprintf(stderr,
               "probe: %d driver API calls after injection, %d of them cuGetProcAddress (%zu "
               "symbols)\n",
               g_driver_calls, total, g_symbols.size());
  for (const auto& [name, count] : g_symbols) {
    if (name.find("cuMem") == 0 || name.find("cuInit") == 0)
      std::fprintf(stderr, "probe:   %s x%d\n", name.c_str(), count);
  }
}

}  // namespace

extern "C" int InitializeInjection(void) {
  CUpti_SubscriberHandle subscriber;
  if (cuptiSubscribe(&subscriber, on_callback, nullptr) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "probe: cannot subscribe\n");
    return 1;
  }
  if (cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "probe: cannot enable the driver API callbacks\n");
    return 1;
  }
  std::atexit(report);
  return 1;
}
