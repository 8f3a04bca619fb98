#include "collector/driver_api_table.h"

#include <cupti.h>

#include <array>

namespace gpuleak::collector {

namespace {

#define GPULEAK_API(name, role) \
  { CUPTI_DRIVER_TRACE_CBID_##name, #name, ApiRole::role }

// Only the 64-bit (_v2 and later) entry points: the original ones take
// 32-bit pointers and are never called by programs built in this century.
constexpr DriverApi kApis[] = {
    GPULEAK_API(cuMemFreeHost, kRelease),
    GPULEAK_API(cuMemHostAlloc, kAllocate),
    GPULEAK_API(cuArrayDestroy, kRelease),
    GPULEAK_API(cuCtxCreate_v2, kContext),
    GPULEAK_API(cuMemAlloc_v2, kAllocate),
    GPULEAK_API(cuMemAllocPitch_v2, kAllocate),
    GPULEAK_API(cuMemFree_v2, kRelease),
    GPULEAK_API(cuArrayCreate_v2, kAllocate),
    GPULEAK_API(cuArray3DCreate_v2, kAllocate),
    GPULEAK_API(cuMemAllocHost_v2, kAllocate),
    GPULEAK_API(cuCtxDestroy_v2, kContext),
    GPULEAK_API(cuMipmappedArrayCreate, kAllocate),
    GPULEAK_API(cuMipmappedArrayDestroy, kRelease),
    GPULEAK_API(cuMemAllocManaged, kAllocate),
    GPULEAK_API(cuDevicePrimaryCtxRetain, kContext),
    GPULEAK_API(cuDevicePrimaryCtxRelease_v2, kContext),
    GPULEAK_API(cuMemAddressReserve, kAllocate),
    GPULEAK_API(cuMemAddressFree, kRelease),
    GPULEAK_API(cuMemCreate, kAllocate),
    GPULEAK_API(cuMemRelease, kRelease),
    GPULEAK_API(cuMemMap, kAllocate),
    GPULEAK_API(cuMemUnmap, kRelease),
    GPULEAK_API(cuMemAllocAsync, kAllocate),
    GPULEAK_API(cuMemAllocAsync_ptsz, kAllocate),
    GPULEAK_API(cuMemFreeAsync, kRelease),
    GPULEAK_API(cuMemFreeAsync_ptsz, kRelease),
    GPULEAK_API(cuMemAllocFromPoolAsync, kAllocate),
    GPULEAK_API(cuMemAllocFromPoolAsync_ptsz, kAllocate),
    GPULEAK_API(cuCtxCreate_v3, kContext),
    GPULEAK_API(cuCtxCreate_v4, kContext),
    GPULEAK_API(cuGraphInstantiateWithFlags, kAllocate),
    GPULEAK_API(cuGraphInstantiateWithParams, kAllocate),
    GPULEAK_API(cuGraphInstantiateWithParams_ptsz, kAllocate),
    GPULEAK_API(cuGraphExecDestroy, kRelease),
};

#undef GPULEAK_API

constexpr std::array<ApiRole, CUPTI_DRIVER_TRACE_CBID_SIZE> kRoles = [] {
  std::array<ApiRole, CUPTI_DRIVER_TRACE_CBID_SIZE> table{};  // all kNotFollowed
  for (const DriverApi& api : kApis) table[api.cbid] = api.role;
  return table;
}();

}  // namespace

std::span<const DriverApi> followed_driver_apis() { return kApis; }

ApiRole role_of(std::uint32_t cbid) {
  return cbid < kRoles.size() ? kRoles[cbid] : ApiRole::kNotFollowed;
}

}  // namespace gpuleak::collector
