/* libgpuleak_interposer.so: the CUDA driver's memory entry points, wrapped.
 *
 * `gpuleak run` puts this library first in LD_PRELOAD. It sees a driver call
 * three ways a program can make it:
 *   - a call linked against libcuda (cuMemAlloc_v2 in the program's PLT):
 *     this library exports every followed entry point under its driver name,
 *     and a preloaded definition wins over libcuda's;
 *   - an entry point looked up with dlsym(libcuda, "cuMemAllocAsync"):
 *     this library exports dlsym, calls the real one and hands back the
 *     wrapper when the answer is one of libcuda's followed entry points;
 *   - an entry point from cuGetProcAddress (the CUDA runtime gets all of its
 *     driver entry points this way, PyTorch's driver calls too): the
 *     wrappers of cuGetProcAddress do the same with the pointer the driver
 *     returns.
 * A wrapper forwards to the real entry point and, once the collector has
 * attached (gpuleak_interposer_attach, interposer_api.h), reports the call
 * to it. Nothing else: no CUPTI, no allocation, no lock on the call path.
 *
 * Which answers are libcuda's: the first time any followed name is seen
 * (a dlsym answer, a PLT call), the library that defines it is asked once
 * for all followed names; later answers are compared by address, so a
 * pointer from some other library with the same name passes untouched.
 *
 * dlsym(RTLD_NEXT, ...) is caller-relative: that case jumps to the real
 * dlsym with the caller's return address untouched (assembly below, for
 * x86-64 and AArch64) and is never wrapped.
 */
#define _GNU_SOURCE
#include <cuda.h>
/* Only for the callback ids and parameter structs (headers, no library). */
#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "gpuleak/interposer_api.h"

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))

enum Role { kAllocate, kRelease, kContext, kLookup };

typedef struct Entry {
  const char* name;
  uint32_t cbid;
  enum Role role;
  void* wrapper;
  _Atomic(void*) real;
} Entry;

/* ---- the real dlsym ---------------------------------------------------- */

typedef void* (*DlsymFunction)(void*, const char*);
HIDDEN DlsymFunction gpuleak_shim_real_dlsym;

HIDDEN DlsymFunction gpuleak_shim_resolve_real_dlsym(void) {
  DlsymFunction real = __atomic_load_n(&gpuleak_shim_real_dlsym, __ATOMIC_ACQUIRE);
  if (real) return real;
  static const char* const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0] && !real; ++i)
    real = (DlsymFunction)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
  __atomic_store_n(&gpuleak_shim_real_dlsym, real, __ATOMIC_RELEASE);
  return real;
}

/* ---- hooks and state --------------------------------------------------- */

static _Atomic(const GpuleakDriverHooks*) g_hooks;
static _Atomic uint64_t g_lookups_wrapped;
static _Atomic uint64_t g_calls_before_attach;
static int g_loaded_before_driver = 1;
/* > 0 while this thread is inside a wrapped call or a hook. */
static __thread int t_depth __attribute__((tls_model("initial-exec")));

static inline const GpuleakDriverHooks* hooks_for_this_call(void) {
  if (t_depth) return NULL;
  const GpuleakDriverHooks* hooks = atomic_load_explicit(&g_hooks, memory_order_acquire);
  if (!hooks) atomic_fetch_add_explicit(&g_calls_before_attach, 1, memory_order_relaxed);
  return hooks;
}

EXPORT int gpuleak_interposer_attach(const GpuleakDriverHooks* hooks) {
  if (hooks && hooks->struct_size < sizeof(GpuleakDriverHooks)) return 0;
  atomic_store_explicit(&g_hooks, hooks, memory_order_release);
  return 1;
}

EXPORT void gpuleak_interposer_state(GpuleakInterposerState* out) {
  if (!out || out->struct_size < sizeof(GpuleakInterposerState)) return;
  out->loaded_before_driver = g_loaded_before_driver;
  out->lookups_wrapped = atomic_load(&g_lookups_wrapped);
  out->calls_before_attach = atomic_load(&g_calls_before_attach);
}

/* Objects in load order: a libcuda before this library means it was not
   preloaded (dlopened later), so lookups made before it bypass it. A
   libcuda after it is fine: the program's own DT_NEEDED libcuda is mapped
   before constructors run, but its calls bind to the preloaded wrappers. */
static int find_order(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  int* state = (int*)data; /* 0 searching, 1 found ourselves, 2 found libcuda first */
  if (*state) return 1;
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  if (strstr(name, "libgpuleak_interposer.so"))
    *state = 1;
  else if (strstr(name, "libcuda.so"))
    *state = 2;
  return 0;
}

__attribute__((constructor)) static void on_load(void) {
  gpuleak_shim_resolve_real_dlsym();
  int state = 0;
  dl_iterate_phdr(find_order, &state);
  g_loaded_before_driver = state != 2;
}

/* ---- the table --------------------------------------------------------- */

/* X(name, role, parameters, arguments): every followed driver entry point,
   with its prototype; the parameter struct of generated_cuda_meta.h lists
   the same parameters in the same order. */
#define GPULEAK_FOLLOWED_APIS(X)                                                                   \
  X(cuMemAlloc_v2, kAllocate, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))             \
  X(cuMemAllocPitch_v2, kAllocate,                                                                 \
    (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, size_t Height,                      \
     unsigned int ElementSizeBytes),                                                               \
    (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                        \
  X(cuMemAllocManaged, kAllocate, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags),       \
    (dptr, bytesize, flags))                                                                       \
  X(cuMemAllocHost_v2, kAllocate, (void** pp, size_t bytesize), (pp, bytesize))                    \
  X(cuMemHostAlloc, kAllocate, (void** pp, size_t bytesize, unsigned int Flags),                   \
    (pp, bytesize, Flags))                                                                         \
  X(cuMemFreeHost, kRelease, (void* p), (p))                                                       \
  X(cuMemFree_v2, kRelease, (CUdeviceptr dptr), (dptr))                                            \
  X(cuMemAllocAsync, kAllocate, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),           \
    (dptr, bytesize, hStream))                                                                     \
  X(cuMemAllocAsync_ptsz, kAllocate, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),      \
    (dptr, bytesize, hStream))                                                                     \
  X(cuMemFreeAsync, kRelease, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))               \
  X(cuMemFreeAsync_ptsz, kRelease, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))          \
  X(cuMemAllocFromPoolAsync, kAllocate,                                                            \
    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),                    \
    (dptr, bytesize, pool, hStream))                                                               \
  X(cuMemAllocFromPoolAsync_ptsz, kAllocate,                                                       \
    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),                    \
    (dptr, bytesize, pool, hStream))                                                               \
  X(cuMemCreate, kAllocate,                                                                        \
    (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,          \
     unsigned long long flags),                                                                    \
    (handle, size, prop, flags))                                                                   \
  X(cuMemRelease, kRelease, (CUmemGenericAllocationHandle handle), (handle))                       \
  X(cuMemMap, kAllocate,                                                                           \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,             \
     unsigned long long flags),                                                                    \
    (ptr, size, offset, handle, flags))                                                            \
  X(cuMemUnmap, kRelease, (CUdeviceptr ptr, size_t size), (ptr, size))                             \
  X(cuMemAddressReserve, kAllocate,                                                                \
    (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                           \
     unsigned long long flags),                                                                    \
    (ptr, size, alignment, addr, flags))                                                           \
  X(cuMemAddressFree, kRelease, (CUdeviceptr ptr, size_t size), (ptr, size))                       \
  X(cuArrayCreate_v2, kAllocate, (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray), \
    (pHandle, pAllocateArray))                                                                     \
  X(cuArray3DCreate_v2, kAllocate,                                                                 \
    (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray), (pHandle, pAllocateArray)) \
  X(cuArrayDestroy, kRelease, (CUarray hArray), (hArray))                                          \
  X(cuMipmappedArrayCreate, kAllocate,                                                             \
    (CUmipmappedArray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,               \
     unsigned int numMipmapLevels),                                                                \
    (pHandle, pMipmappedArrayDesc, numMipmapLevels))                                               \
  X(cuMipmappedArrayDestroy, kRelease, (CUmipmappedArray hMipmappedArray), (hMipmappedArray))      \
  X(cuCtxCreate_v2, kContext, (CUcontext * pctx, unsigned int flags, CUdevice dev),                \
    (pctx, flags, dev))                                                                            \
  X(cuCtxCreate_v3, kContext,                                                                      \
    (CUcontext * pctx, CUexecAffinityParam * paramsArray, int numParams, unsigned int flags,       \
     CUdevice dev),                                                                                \
    (pctx, paramsArray, numParams, flags, dev))                                                    \
  X(cuCtxCreate_v4, kContext,                                                                      \
    (CUcontext * pctx, CUctxCreateParams * ctxCreateParams, unsigned int flags, CUdevice dev),     \
    (pctx, ctxCreateParams, flags, dev))                                                           \
  X(cuCtxDestroy_v2, kContext, (CUcontext ctx), (ctx))                                             \
  X(cuDevicePrimaryCtxRetain, kContext, (CUcontext * pctx, CUdevice dev), (pctx, dev))             \
  X(cuDevicePrimaryCtxRelease_v2, kContext, (CUdevice dev), (dev))                                 \
  X(cuGraphInstantiateWithFlags, kAllocate,                                                        \
    (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags),                         \
    (phGraphExec, hGraph, flags))                                                                  \
  X(cuGraphInstantiateWithParams, kAllocate,                                                       \
    (CUgraphExec * phGraphExec, CUgraph hGraph,                                                    \
     CUDA_GRAPH_INSTANTIATE_PARAMS * instantiateParams),                                           \
    (phGraphExec, hGraph, instantiateParams))                                                      \
  X(cuGraphInstantiateWithParams_ptsz, kAllocate,                                                  \
    (CUgraphExec * phGraphExec, CUgraph hGraph,                                                    \
     CUDA_GRAPH_INSTANTIATE_PARAMS * instantiateParams),                                           \
    (phGraphExec, hGraph, instantiateParams))                                                      \
  X(cuGraphExecDestroy, kRelease, (CUgraphExec hGraphExec), (hGraphExec))

#define GPULEAK_LOOKUP_APIS(X)                                                             \
  X(cuGetProcAddress, (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags), \
    (symbol, pfn, cudaVersion, flags))                                                     \
  X(cuGetProcAddress_v2,                                                                   \
    (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,                    \
     CUdriverProcAddressQueryResult* symbolStatus),                                        \
    (symbol, pfn, cudaVersion, flags, symbolStatus))

enum EntryIndex {
#define GPULEAK_INDEX(name, ...) kIndex_##name,
  GPULEAK_FOLLOWED_APIS(GPULEAK_INDEX) GPULEAK_LOOKUP_APIS(GPULEAK_INDEX)
#undef GPULEAK_INDEX
      kEntries
};

/* The wrappers, declared under their driver names. */
#define GPULEAK_DECLARE(name, role, parameters, arguments) \
  EXPORT CUresult gpuleak_wrap_##name parameters __asm__(#name);
GPULEAK_FOLLOWED_APIS(GPULEAK_DECLARE)
#undef GPULEAK_DECLARE
#define GPULEAK_DECLARE_LOOKUP(name, parameters, arguments) \
  EXPORT CUresult gpuleak_wrap_##name parameters __asm__(#name);
GPULEAK_LOOKUP_APIS(GPULEAK_DECLARE_LOOKUP)
#undef GPULEAK_DECLARE_LOOKUP

static Entry g_entries[kEntries] = {
#define GPULEAK_ROW(name, role, parameters, arguments) \
  [kIndex_##name] = {#name, CUPTI_DRIVER_TRACE_CBID_##name, role, (void*)gpuleak_wrap_##name},
    GPULEAK_FOLLOWED_APIS(GPULEAK_ROW)
#undef GPULEAK_ROW
#define GPULEAK_LOOKUP_ROW(name, parameters, arguments) \
  [kIndex_##name] = {#name, CUPTI_DRIVER_TRACE_CBID_##name, kLookup, (void*)gpuleak_wrap_##name},
        GPULEAK_LOOKUP_APIS(GPULEAK_LOOKUP_ROW)
#undef GPULEAK_LOOKUP_ROW
};

static _Atomic int g_table_resolved;

/* Asks the library that defines `symbol` for every followed entry point. */
static void resolve_table_from(const void* symbol) {
  if (atomic_load_explicit(&g_table_resolved, memory_order_acquire)) return;
  Dl_info info, self;
  if (!dladdr(symbol, &info) || !info.dli_fname) return;
  /* Our own wrappers are never the driver (a lookup handed one out already). */
  if (dladdr((const void*)resolve_table_from, &self) && self.dli_fbase == info.dli_fbase) return;
  void* library = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  if (!library) return;
  DlsymFunction real_dlsym = gpuleak_shim_resolve_real_dlsym();
  if (real_dlsym) {
    for (int i = 0; i < kEntries; ++i) {
      void* expected = NULL;
      void* real = real_dlsym(library, g_entries[i].name);
      if (real) atomic_compare_exchange_strong(&g_entries[i].real, &expected, real);
    }
  }
  dlclose(library); /* it stays loaded: the program holds it */
  atomic_store_explicit(&g_table_resolved, 1, memory_order_release);
}

/* The real entry point of a wrapper called through a PLT (the program was
   linked against libcuda) before any lookup: the next definition after
   this library. */
static __attribute__((noinline)) void* find_real(int index) {
  DlsymFunction real_dlsym = gpuleak_shim_resolve_real_dlsym();
  if (!real_dlsym) return NULL;
  void* next = real_dlsym(RTLD_NEXT, g_entries[index].name);
  if (!next) return NULL;
  resolve_table_from(next);
  void* expected = NULL;
  atomic_compare_exchange_strong(&g_entries[index].real, &expected, next);
  return atomic_load_explicit(&g_entries[index].real, memory_order_acquire);
}

static inline void* real_of(int index) {
  void* real = atomic_load_explicit(&g_entries[index].real, memory_order_acquire);
  return real ? real : find_real(index);
}

/* The wrapper to hand out instead of `pointer`, or `pointer` itself. */
static void* wrapped_answer(const char* name, void* pointer) {
  if (!pointer) return pointer;
  for (int i = 0; i < kEntries; ++i) {
    if (g_entries[i].wrapper == pointer) return pointer;
  }
  if (!atomic_load_explicit(&g_table_resolved, memory_order_acquire)) {
    /* Only a followed name (or a lookup function) makes us look at the
       library it came from. */
    int followed = 0;
    for (int i = 0; i < kEntries && !followed; ++i) followed = strcmp(g_entries[i].name, name) == 0;
    if (!followed) return pointer;
    resolve_table_from(pointer);
  }
  for (int i = 0; i < kEntries; ++i) {
    if (atomic_load_explicit(&g_entries[i].real, memory_order_relaxed) == pointer) {
      atomic_fetch_add_explicit(&g_lookups_wrapped, 1, memory_order_relaxed);
      return g_entries[i].wrapper;
    }
  }
  return pointer;
}

/* ---- dlsym ------------------------------------------------------------- */

/* Every handle but RTLD_NEXT (which the assembly entry below sends straight
   to the real dlsym). */
HIDDEN void* gpuleak_shim_dlsym(void* handle, const char* name) {
  DlsymFunction real_dlsym = gpuleak_shim_resolve_real_dlsym();
  if (!real_dlsym) return NULL;
  void* answer = real_dlsym(handle, name);
  if (!answer || !name || name[0] != 'c' || name[1] != 'u') return answer;
  return wrapped_answer(name, answer);
}

#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl dlsym\n"
    ".type dlsym, @function\n"
    "dlsym:\n"
    "  cmpq $-1, %rdi\n"
    "  jne gpuleak_shim_dlsym\n"
    "  movq gpuleak_shim_real_dlsym(%rip), %rax\n"
    "  testq %rax, %rax\n"
    "  jnz 1f\n"
    "  pushq %rdi\n"
    "  pushq %rsi\n"
    "  subq $8, %rsp\n"
    "  call gpuleak_shim_resolve_real_dlsym\n"
    "  addq $8, %rsp\n"
    "  popq %rsi\n"
    "  popq %rdi\n"
    "  testq %rax, %rax\n"
    "  jz 2f\n"
    "1:\n"
    "  jmp *%rax\n"
    "2:\n"
    "  ret\n"
    ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(
    ".text\n"
    ".globl dlsym\n"
    ".type dlsym, %function\n"
    "dlsym:\n"
    "  cmn x0, #1\n"
    "  b.ne gpuleak_shim_dlsym\n"
    "  adrp x16, gpuleak_shim_real_dlsym\n"
    "  ldr x16, [x16, :lo12:gpuleak_shim_real_dlsym]\n"
    "  cbnz x16, 1f\n"
    "  stp x29, x30, [sp, #-32]!\n"
    "  stp x0, x1, [sp, #16]\n"
    "  bl gpuleak_shim_resolve_real_dlsym\n"
    "  mov x16, x0\n"
    "  ldp x0, x1, [sp, #16]\n"
    "  ldp x29, x30, [sp], #32\n"
    "  cbz x16, 2f\n"
    "1:\n"
    "  br x16\n"
    "2:\n"
    "  mov x0, #0\n"
    "  ret\n"
    ".size dlsym, .-dlsym\n");
#else
/* Elsewhere RTLD_NEXT lookups go through here and are relative to this
   library rather than to the caller. */
EXPORT void* dlsym(void* handle, const char* name) { return gpuleak_shim_dlsym(handle, name); }
#endif

/* ---- the wrappers ------------------------------------------------------ */

#define GPULEAK_DEFINE(name, role, parameters, arguments)                                      \
  typedef CUresult(CUDAAPI* name##_function) parameters;                                       \
  CUresult gpuleak_wrap_##name parameters {                                                    \
    name##_function real = (name##_function)real_of(kIndex_##name);                            \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;                                              \
    const GpuleakDriverHooks* hooks = hooks_for_this_call();                                   \
    if (!hooks) {                                                                              \
      ++t_depth;                                                                               \
      CUresult plain = real arguments;                                                         \
      --t_depth;                                                                               \
      return plain;                                                                            \
    }                                                                                          \
    name##_params params = {GPULEAK_UNPAREN arguments};                                        \
    ++t_depth;                                                                                 \
    uint64_t token =                                                                           \
        (role) == kAllocate ? 0 : hooks->before_call(CUPTI_DRIVER_TRACE_CBID_##name, &params); \
    CUresult result = real arguments;                                                          \
    hooks->after_call(CUPTI_DRIVER_TRACE_CBID_##name, &params, (int)result, token);            \
    --t_depth;                                                                                 \
    return result;                                                                             \
  }
#define GPULEAK_UNPAREN(...) __VA_ARGS__
GPULEAK_FOLLOWED_APIS(GPULEAK_DEFINE)
#undef GPULEAK_DEFINE

/* The driver's answer to a lookup, with followed entry points wrapped. */
#define GPULEAK_DEFINE_LOOKUP(name, parameters, arguments)          \
  typedef CUresult(CUDAAPI* name##_function) parameters;            \
  CUresult gpuleak_wrap_##name parameters {                         \
    name##_function real = (name##_function)real_of(kIndex_##name); \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;                   \
    CUresult result = real arguments;                               \
    if (result == CUDA_SUCCESS && pfn && *pfn && symbol) {          \
      resolve_table_from(*pfn);                                     \
      *pfn = wrapped_answer(symbol, *pfn);                          \
    }                                                               \
    return result;                                                  \
  }
GPULEAK_LOOKUP_APIS(GPULEAK_DEFINE_LOOKUP)
#undef GPULEAK_DEFINE_LOOKUP
