/* A stand-in for libcuda.so.1, for the interposer backend on machines
 * without a GPU (CI). Built with the soname libcuda.so.1 so the collector's
 * own driver look-ups find it.
 *
 * cuInit loads CUDA_INJECTION64_PATH and calls its InitializeInjection, as
 * the driver does. cuGetProcAddress(_v2) answers by name with this library's
 * entry points, like the real one (base name + version, _ptsz for per-thread
 * default stream). Allocation calls hand out addresses from a bump pointer,
 * reuse a freed address for the next allocation of the same size, fail
 * above 1 TiB with CUDA_ERROR_OUT_OF_MEMORY and fail a free of an unknown
 * address with CUDA_ERROR_INVALID_VALUE. cuMemAllocAsync is implemented by
 * calling the exported cuMemAllocFromPoolAsync, as a driver calling its own
 * entry point would: the interposer must report it once. Graphs: a CUgraph
 * handle's value is its node count (cuGraphGetNodes answers it), and
 * cuGraphInstantiateWithFlags hands out executable-graph handles from a
 * counter; cuGraphExecDestroy fails for one it never handed out or already
 * destroyed. Single-threaded.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuda.h renames cuGetProcAddress to its _v2; the driver exports both. */
#undef cuGetProcAddress

#define EXPORT __attribute__((visibility("default")))
#define LIMIT_BYTES (1ull << 40)
#define MAX_BLOCKS 4096

struct Block {
  CUdeviceptr address;
  size_t size;
  int live;
};
static struct Block g_blocks[MAX_BLOCKS];
static int g_block_count;
static CUdeviceptr g_next_address = 0x7e0000000000ull;
static CUcontext g_current;
static int g_initialized;

static CUresult allocate(CUdeviceptr* out, size_t size) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
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

EXPORT CUresult cuInit(unsigned int flags) {
  (void)flags;
  if (g_initialized) return CUDA_SUCCESS;
  g_initialized = 1;
  const char* injection = getenv("CUDA_INJECTION64_PATH");
  if (injection && *injection) {
    void* library = dlopen(injection, RTLD_NOW);
    int (*initialize)(void) = library ? (int (*)(void))dlsym(library, "InitializeInjection") : NULL;
    if (initialize) initialize();
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  (void)device;
  g_current = (CUcontext)(uintptr_t)0xc0ffee;
  *context = g_current;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = g_current;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  if (!g_current) return CUDA_ERROR_INVALID_CONTEXT;
  *device = 0;
  return CUDA_SUCCESS;
}

/* One device, as a process with one visible GPU sees; STAND_IN_DRIVER_DEVICES
   says otherwise (the collector then asks for each context's device). */
EXPORT CUresult cuDeviceGetCount(int* count) {
  const char* devices = getenv("STAND_IN_DRIVER_DEVICES");
  *count = devices && *devices ? atoi(devices) : 1;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* address, size_t size) { return allocate(address, size); }
EXPORT CUresult cuMemFree_v2(CUdeviceptr address) { return release(address); }

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* address, size_t size, CUmemoryPool pool,
                                        CUstream stream) {
  (void)pool;
  (void)stream;
  return allocate(address, size);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr* address, size_t size, CUstream stream) {
  return cuMemAllocFromPoolAsync(address, size, NULL, stream);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* address, size_t size, CUstream stream) {
  return cuMemAllocFromPoolAsync(address, size, NULL, stream);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr address, CUstream stream) {
  (void)stream;
  return release(address);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr address, CUstream stream) {
  (void)stream;
  return release(address);
}

/* Executable graphs handed out, by handle - 0x6e000 (live or not). */
#define MAX_GRAPH_EXECS 4096
static unsigned char g_graph_exec_live[MAX_GRAPH_EXECS];
static int g_graph_exec_count;

EXPORT CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (nodes) return CUDA_ERROR_NOT_SUPPORTED; /* the collector asks for the count only */
  *count = (size_t)(uintptr_t)graph;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                            unsigned long long flags) {
  (void)flags;
  if (!exec || !graph) return CUDA_ERROR_INVALID_VALUE;
  if (g_graph_exec_count == MAX_GRAPH_EXECS) return CUDA_ERROR_OUT_OF_MEMORY;
  g_graph_exec_live[g_graph_exec_count] = 1;
  *exec = (CUgraphExec)(uintptr_t)(0x6e000 + g_graph_exec_count++);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  uintptr_t index = (uintptr_t)exec - 0x6e000;
  if ((uintptr_t)exec < 0x6e000 || index >= (uintptr_t)g_graph_exec_count ||
      !g_graph_exec_live[index])
    return CUDA_ERROR_INVALID_VALUE;
  g_graph_exec_live[index] = 0;
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status) {
  char name[128];
  /* The versioned names the real driver picks for these base names. */
  const char* suffix = "";
  if (strcmp(symbol, "cuMemAlloc") == 0 || strcmp(symbol, "cuMemFree") == 0) suffix = "_v2";
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
      (strcmp(symbol, "cuMemAllocAsync") == 0 || strcmp(symbol, "cuMemFreeAsync") == 0))
    suffix = "_ptsz";
  (void)version;
  /* CUDA 12's cuGraphInstantiate is the entry point cuGraphInstantiateWithFlags. */
  if (strcmp(symbol, "cuGraphInstantiate") == 0) symbol = "cuGraphInstantiateWithFlags";
  snprintf(name, sizeof name, "%s%s", symbol, suffix);
  /* The driver's own table, as the real one has (no dlsym). */
  static const struct {
    const char* name;
    void* function;
  } table[] = {
      {"cuInit", (void*)cuInit},
      {"cuDevicePrimaryCtxRetain", (void*)cuDevicePrimaryCtxRetain},
      {"cuCtxGetCurrent", (void*)cuCtxGetCurrent},
      {"cuCtxGetDevice", (void*)cuCtxGetDevice},
      {"cuDeviceGetCount", (void*)cuDeviceGetCount},
      {"cuMemAlloc_v2", (void*)cuMemAlloc_v2},
      {"cuMemFree_v2", (void*)cuMemFree_v2},
      {"cuMemAllocAsync", (void*)cuMemAllocAsync},
      {"cuMemAllocAsync_ptsz", (void*)cuMemAllocAsync_ptsz},
      {"cuMemFreeAsync", (void*)cuMemFreeAsync},
      {"cuMemFreeAsync_ptsz", (void*)cuMemFreeAsync_ptsz},
      {"cuMemAllocFromPoolAsync", (void*)cuMemAllocFromPoolAsync},
      {"cuGraphGetNodes", (void*)cuGraphGetNodes},
      {"cuGraphInstantiateWithFlags", (void*)cuGraphInstantiateWithFlags},
      {"cuGraphExecDestroy", (void*)cuGraphExecDestroy},
      {"cuGetProcAddress", (void*)cuGetProcAddress},
      {"cuGetProcAddress_v2", (void*)cuGetProcAddress_v2},
  };
  *pfn = NULL;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
    if (strcmp(table[i].name, name) == 0) *pfn = table[i].function;
  }
  if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* For the CPU benchmark: the pair's work without any exported entry point
   in between (not even the internal cuMemAllocFromPoolAsync call, which the
   interposer would see), i.e. what "native" costs here. */
static CUresult native_alloc_async(CUdeviceptr* address, size_t size, CUstream stream) {
  (void)stream;
  return allocate(address, size);
}

static CUresult native_free_async(CUdeviceptr address, CUstream stream) {
  (void)stream;
  return release(address);
}

EXPORT void* stand_in_driver_entry(const char* name) {
  if (strcmp(name, "cuMemAllocAsync") == 0) return (void*)native_alloc_async;
  if (strcmp(name, "cuMemFreeAsync") == 0) return (void*)native_free_async;
  return NULL;
}
