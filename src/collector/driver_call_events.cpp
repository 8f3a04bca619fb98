#include "collector/driver_call_events.h"

#include <cupti.h>

#include "collector/array_size.h"
#include "collector/graph_exec_size.h"

namespace gpuleak::collector {

namespace {

using trace::ContextAction;
using trace::MemoryKind;

std::uint64_t array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR* d) {
  if (!d) return 0;
  return cuda_array_bytes(static_cast<unsigned>(d->Format), d->NumChannels, d->Width, d->Height,
                          d->Depth);
}

// An executable graph: its handle, and its size estimated once it exists
// (the node count is read only at exit, for a successful call).
Allocation graph_exec(const CUgraphExec* out, CUgraph graph, bool done) {
  if (!done || !out) return {0, 0, MemoryKind::kGraphExec, 0};
  return {reinterpret_cast<std::uintptr_t>(*out), estimated_graph_exec_bytes(graph),
          MemoryKind::kGraphExec, 0};
}

}  // namespace

// Reads the parameters of an allocating API. At API exit (`done`), the out
// pointers hold the result.
bool describe_allocation(std::uint32_t cbid, const void* params, bool done, Allocation* a) {
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
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags: {
      // cudaGraphInstantiate and cudaGraphInstantiateWithFlags come here.
      auto* p = static_cast<const cuGraphInstantiateWithFlags_params*>(params);
      *a = graph_exec(p->phGraphExec, p->hGraph, done);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: {
      // The _ptsz variant has the same layout.
      auto* p = static_cast<const cuGraphInstantiateWithParams_params*>(params);
      *a = graph_exec(p->phGraphExec, p->hGraph, done);
      return true;
    }
    default:
      return false;
  }
}

// Reads the parameters of a releasing API.
bool describe_release(std::uint32_t cbid, const void* params, Allocation* a) {
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
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy:
      *a = {reinterpret_cast<std::uintptr_t>(
                static_cast<const cuGraphExecDestroy_params*>(params)->hGraphExec),
            0, MemoryKind::kGraphExec};
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

void record_context_call(Recorder& recorder, std::uint32_t cbid, const void* params, bool exit,
                         CUresult result) {
  auto created = [&](CUcontext* out, int device, ContextAction action) {
    if (!exit || result != CUDA_SUCCESS || !out) return;
    context_devices().remember(*out, device);
    recorder.record_context(action, reinterpret_cast<std::uintptr_t>(*out), device);
  };
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2: {
      auto* p = static_cast<const cuCtxCreate_v2_params*>(params);
      created(p->pctx, p->dev, ContextAction::kCreated);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3: {
      auto* p = static_cast<const cuCtxCreate_v3_params*>(params);
      created(p->pctx, p->dev, ContextAction::kCreated);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4: {
      auto* p = static_cast<const cuCtxCreate_v4_params*>(params);
      created(p->pctx, p->dev, ContextAction::kCreated);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain: {
      auto* p = static_cast<const cuDevicePrimaryCtxRetain_params*>(params);
      created(p->pctx, p->dev, ContextAction::kPrimaryRetained);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2: {
      if (exit) break;
      CUcontext context = static_cast<const cuCtxDestroy_v2_params*>(params)->ctx;
      recorder.record_context(ContextAction::kDestroyed, reinterpret_cast<std::uintptr_t>(context),
                              context_devices().device_of(context));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2: {
      if (exit) break;
      int device = static_cast<const cuDevicePrimaryCtxRelease_v2_params*>(params)->dev;
      recorder.record_context(ContextAction::kPrimaryReleased, 0, device);
      break;
    }
    default:
      break;
  }
}

}  // namespace gpuleak::collector
