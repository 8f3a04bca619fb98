/* The driver calls the stand-in CUPTI plays (stand_in_cupti.c). Programs
 * look them up with dlsym in the stand-in the collector loaded, so that the
 * callbacks reach the collector's subscription. */
#pragma once

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef CUresult (*StandInPrimaryCtxRetain)(CUcontext* context, CUdevice device);
typedef CUresult (*StandInMemAllocAsync)(CUdeviceptr* address, size_t size, CUstream stream);
typedef CUresult (*StandInMemFreeAsync)(CUdeviceptr address, CUstream stream);
typedef CUresult (*StandInMemAlloc)(CUdeviceptr* address, size_t size);
typedef CUresult (*StandInMemFree)(CUdeviceptr address);

#ifdef __cplusplus
}
#endif
