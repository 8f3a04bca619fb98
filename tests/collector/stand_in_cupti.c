/* A stand-in for libcupti and for the few CUDA driver calls the collector
 * follows, for machines without a GPU (CI and the CPU benchmark).
 *
 * The collector loads it as its CUPTI (GPULEAK_CUPTI_LIBRARY names it) and
 * subscribes through cuptiSubscribe/cuptiEnableCallback as it would with the
 * real one. A test program then calls stand_in_cuMemAllocAsync() and friends
 * (declared in stand_in_cupti.h): each plays the driver's API entry point,
 * calling the subscriber at API entry and exit with the parameter structs of
 * cupti's generated headers, the way libcuda does, through a few frames of
 * "driver" in between so native stacks have a realistic shape.
 *
 * The fake device hands out addresses from a bump pointer, reuses a freed
 * address for the next allocation of the same size (as the stream-ordered
 * pool does), fails an allocation above STAND_IN_CUPTI_LIMIT_BYTES with
 * CUDA_ERROR_OUT_OF_MEMORY, and fails a free of an address it did not hand
 * out with CUDA_ERROR_INVALID_VALUE. Single-threaded by design.
 */
#include "stand_in_cupti.h"

#include <cupti.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Frames between the API entry point and the subscriber: libcuda and
   libcupti put about ten there. */
#define DRIVER_FRAMES 8
#define LIMIT_BYTES (1ull << 40)
#define MAX_BLOCKS 4096

static CUpti_CallbackFunc g_callback;
static void* g_userdata;
static char g_subscriber_name[64];
static unsigned char g_enabled[CUPTI_DRIVER_TRACE_CBID_SIZE];
static uint32_t g_correlation_id;

struct Block {
  CUdeviceptr address;
  size_t size;
  int live;
};
static struct Block g_blocks[MAX_BLOCKS];
static int g_block_count;
static CUdeviceptr g_next_address = 0x7f0000000000ull;

/* STAND_IN_CUPTI_REENTER=<collector path>: while subscribing, call that
   collector's InitializeInjection again on this thread, as a library that
   re-enters cuInit from inside a CUPTI call would. */
static void reenter_injection_if_asked(void) {
  const char* collector = getenv("STAND_IN_CUPTI_REENTER");
  if (!collector || !*collector) return;
  void* library = dlopen(collector, RTLD_NOLOAD | RTLD_LAZY);
  int (*initialize)(void) = library ? (int (*)(void))dlsym(library, "InitializeInjection") : NULL;
  if (initialize) initialize();
}

static CUptiResult subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                             void* userdata, const char* name) {
  reenter_injection_if_asked();
  if (g_callback) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_callback = callback;
  g_userdata = userdata;
  snprintf(g_subscriber_name, sizeof g_subscriber_name, "CUPTI for %s", name ? name : "unknown");
  *subscriber = (CUpti_SubscriberHandle)&g_callback;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                  void* userdata) {
  return subscribe(subscriber, callback, userdata, NULL);
}

/* As CUDA 13's: a refused subscriber learns the holder's name. */
EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                     CUpti_CallbackFunc callback, void* userdata,
                                     CUpti_SubscriberParams* params) {
  CUptiResult result =
      subscribe(subscriber, callback, userdata, params ? params->subscriberName : NULL);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params &&
      params->oldSubscriberName && params->oldSubscriberSize)
    snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", g_subscriber_name);
  return result;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  (void)subscriber;
  g_callback = NULL;
  memset(g_enabled, 0, sizeof g_enabled);
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  (void)subscriber;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  g_enabled[cbid] = enable ? 1 : 0;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** text) {
  *text = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "stand-in CUPTI error";
  return CUPTI_SUCCESS;
}

/* ---- the driver side -------------------------------------------------- */

typedef CUresult (*Body)(void* params);

/* The subscriber is called from DRIVER_FRAMES frames below the entry point.
   noinline and the volatile depth keep every frame a real one. */
static __attribute__((noinline)) CUresult dispatch(int depth, CUpti_CallbackId cbid,
                                                   const char* name, void* params, Body body) {
  if (depth > 0) {
    CUresult r = dispatch(depth - 1, cbid, name, params, body);
    __asm__ volatile("" ::: "memory"); /* not a tail call: keep the frame */
    return r;
  }
  if (!g_callback || !g_enabled[cbid]) return body(params);
  uint64_t correlation_data = 0;
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data;
  memset(&data, 0, sizeof data);
  data.functionName = name;
  data.functionParams = params;
  data.functionReturnValue = &result;
  data.context = (CUcontext)(uintptr_t)0xc0ffee;
  data.contextUid = 1;
  data.correlationData = &correlation_data;
  data.correlationId = ++g_correlation_id;
  data.callbackSite = CUPTI_API_ENTER;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  result = body(params);
  data.callbackSite = CUPTI_API_EXIT;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  return result;
}

static CUresult call_api(CUpti_CallbackId cbid, const char* name, void* params, Body body) {
  volatile int depth = DRIVER_FRAMES;
  return dispatch(depth, cbid, name, params, body);
}

static CUresult allocate(CUdeviceptr* out, size_t size) {
  if (size > LIMIT_BYTES) return CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < g_block_count; ++i) {
    if (!g_blocks[i].live && g_blocks[i].size == size) {
      g_blocks[i].live = 1;
      *out = g_blocks[i].address;
      return CUDA_SUCCESS;
    }
  }
  if (g_block_count == MAX_BLOCKS) return CUDA_ERROR_OUT_OF_MEMORY;
  struct Block* b = &g_blocks[g_block_count++];
  b->address = g_next_address;
  b->size = size;
  b->live = 1;
  g_next_address += (size + 0xfffu) & ~(CUdeviceptr)0xfffu;
  *out = b->address;
  return CUDA_SUCCESS;
}

static CUresult release(CUdeviceptr address) {
  for (int i = 0; i < g_block_count; ++i) {
    if (g_blocks[i].live && g_blocks[i].address == address) {
      g_blocks[i].live = 0;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult alloc_async_body(void* p) {
  cuMemAllocAsync_params* params = (cuMemAllocAsync_params*)p;
  return allocate(params->dptr, params->bytesize);
}

static CUresult free_async_body(void* p) { return release(((cuMemFreeAsync_params*)p)->dptr); }

static CUresult alloc_body(void* p) {
  cuMemAlloc_v2_params* params = (cuMemAlloc_v2_params*)p;
  return allocate(params->dptr, params->bytesize);
}

static CUresult free_body(void* p) { return release(((cuMemFree_v2_params*)p)->dptr); }

static CUresult retain_body(void* p) {
  *((cuDevicePrimaryCtxRetain_params*)p)->pctx = (CUcontext)(uintptr_t)0xc0ffee;
  return CUDA_SUCCESS;
}

EXPORT CUresult stand_in_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  cuDevicePrimaryCtxRetain_params params = {context, device};
  return call_api(CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",
                  &params, retain_body);
}

EXPORT CUresult stand_in_cuMemAllocAsync(CUdeviceptr* address, size_t size, CUstream stream) {
  cuMemAllocAsync_params params = {address, size, stream};
  return call_api(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, "cuMemAllocAsync", &params,
                  alloc_async_body);
}

EXPORT CUresult stand_in_cuMemFreeAsync(CUdeviceptr address, CUstream stream) {
  cuMemFreeAsync_params params = {address, stream};
  return call_api(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, "cuMemFreeAsync", &params,
                  free_async_body);
}

EXPORT CUresult stand_in_cuMemAlloc(CUdeviceptr* address, size_t size) {
  cuMemAlloc_v2_params params = {address, size};
  return call_api(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &params, alloc_body);
}

EXPORT CUresult stand_in_cuMemFree(CUdeviceptr address) {
  cuMemFree_v2_params params = {address};
  return call_api(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &params, free_body);
}
