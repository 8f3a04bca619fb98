// Leak: a virtual-memory-management handle (cuMemCreate) that is unmapped
// but never released, so its physical memory stays allocated. One handle of
// the allocation granularity leaks; the address range is freed.
#include "check.h"

int main() {
  CHECK_DRIVER(cuInit(0));
  CUdevice device;
  CHECK_DRIVER(cuDeviceGet(&device, 0));
  CUcontext context;
  CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_DRIVER(cuCtxSetCurrent(context));

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  CHECK_DRIVER(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));

  CUdeviceptr range = 0;
  CHECK_DRIVER(cuMemAddressReserve(&range, granularity, 0, 0, 0));
  CUmemGenericAllocationHandle handle;
  CHECK_DRIVER(cuMemCreate(&handle, granularity, &prop, 0));  // LEAK 1 x granularity
  CHECK_DRIVER(cuMemMap(range, granularity, 0, handle, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_DRIVER(cuMemSetAccess(range, granularity, &access, 1));
  CHECK_DRIVER(cuMemsetD8(range, 0, granularity));
  CHECK_DRIVER(cuMemUnmap(range, granularity));
  CHECK_DRIVER(cuMemAddressFree(range, granularity));
  // Missing: cuMemRelease(handle);
  std::printf("vmm_leak: granularity %zu bytes\n", granularity);
  return 0;
}
