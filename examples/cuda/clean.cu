// No leak: every kind of allocation the collector follows, each freed.
#include "check.h"

int main() {
  void* device = nullptr;
  CHECK(cudaMalloc(&device, 1 << 20));
  CHECK(cudaFree(device));

  void* pitched = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 100));
  CHECK(cudaFree(pitched));

  void* managed = nullptr;
  CHECK(cudaMallocManaged(&managed, 1 << 20));
  CHECK(cudaFree(managed));

  void* host = nullptr;
  CHECK(cudaMallocHost(&host, 1 << 20));
  CHECK(cudaFreeHost(host));

  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  void* async = nullptr;
  CHECK(cudaMallocAsync(&async, 1 << 20, stream));
  CHECK(cudaFreeAsync(async, stream));
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));

  cudaArray_t array;
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  CHECK(cudaMallocArray(&array, &desc, 256, 256));
  CHECK(cudaFreeArray(array));

  CUdevice dev;
  CHECK_DRIVER(cuCtxGetDevice(&dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t granularity = 0;
  CHECK_DRIVER(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUdeviceptr range = 0;
  CHECK_DRIVER(cuMemAddressReserve(&range, granularity, 0, 0, 0));
  CUmemGenericAllocationHandle handle;
  CHECK_DRIVER(cuMemCreate(&handle, granularity, &prop, 0));
  CHECK_DRIVER(cuMemMap(range, granularity, 0, handle, 0));
  CHECK_DRIVER(cuMemUnmap(range, granularity));
  CHECK_DRIVER(cuMemRelease(handle));
  CHECK_DRIVER(cuMemAddressFree(range, granularity));

  std::printf("clean: done\n");
  return 0;
}
