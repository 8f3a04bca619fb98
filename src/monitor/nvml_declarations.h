// The part of NVML's C ABI that gpuleak uses, declared by hand.
//
// No nvml.h is available from the package registries this project uses (only
// a non-free package ships it), and the monitor must start on machines without
// a driver, so libnvidia-ml.so.1 is opened with dlopen and only the types and
// functions below are used. Each layout matches NVIDIA's published header;
// nothing else from NVML is assumed.
//
// nvmlProcessInfo_t: the header of CUDA 12.2 briefly added a fifth field
// (usedGpuCcProtectedMemory) to this struct; later headers moved that field
// to nvmlProcessDetail_v1_t and restored the four-field layout, which is what
// the driver's nvmlDeviceGetComputeRunningProcesses_v3 writes (NVIDIA's own
// Python binding, nvidia-ml-py, declares v3 as the v2 layout). The reader
// allocates room for the larger layout anyway, so a driver that writes it
// could at worst mis-read entries, never overrun the buffer.
#pragma once

#include <cstdint>

namespace gpuleak::monitor::nvml {

using Return = int;                   // nvmlReturn_t
using Device = struct DeviceOpaque*;  // nvmlDevice_t

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;

// Buffer sizes NVIDIA documents as large enough (the *_V2_BUFFER_SIZE values).
inline constexpr unsigned kUuidBufferSize = 96;
inline constexpr unsigned kNameBufferSize = 96;
inline constexpr unsigned kDriverVersionBufferSize = 80;

// usedGpuMemory holds this when the driver cannot tell (e.g. under some
// virtualization modes).
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {  // nvmlMemory_v2_t; `used` excludes `reserved`
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct size with the version in the top byte.
inline constexpr unsigned int kMemoryV2Version =
    static_cast<unsigned int>(sizeof(MemoryV2)) | (2U << 24U);

// The members keep NVML's own names (its header and documentation spell them
// so), hence the NOLINTs for the naming rule.
struct ProcessInfo {  // nvmlProcessInfo_t as written by the _v2 and _v3 calls
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NOLINT(readability-identifier-naming): NVML's name
  unsigned int gpuInstanceId;        // NOLINT(readability-identifier-naming): NVML's name
  unsigned int computeInstanceId;    // NOLINT(readability-identifier-naming): NVML's name
};
// The largest layout a driver has ever been documented to write per entry.
inline constexpr unsigned kLargestProcessInfoBytes = 32;

static_assert(sizeof(Memory) == 24);
static_assert(sizeof(MemoryV2) == 40);
static_assert(sizeof(ProcessInfo) == 24);

using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using SystemGetDriverVersionFn = Return (*)(char*, unsigned);
using DeviceGetCountFn = Return (*)(unsigned*);
using DeviceGetHandleByIndexFn = Return (*)(unsigned, Device*);
using DeviceGetUuidFn = Return (*)(Device, char*, unsigned);
using DeviceGetNameFn = Return (*)(Device, char*, unsigned);
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
using DeviceGetMemoryInfoV2Fn = Return (*)(Device, MemoryV2*);
using DeviceGetMinorNumberFn = Return (*)(Device, unsigned*);
using DeviceGetComputeRunningProcessesFn = Return (*)(Device, unsigned*, ProcessInfo*);

}  // namespace gpuleak::monitor::nvml
