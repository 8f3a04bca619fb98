/* A stand-in for libnvidia-ml.so.1 on machines without a GPU (CI).
 *
 * It exports the NVML functions gpuleak loads, with the ABI gpuleak
 * declares, and answers from a text file named by
 * GPULEAK_STAND_IN_NVML_STATE, re-read on every device count so a test can
 * change it while gpuleak runs:
 *
 *   init_error <nvml return code>                    nvmlInit_v2 fails with it
 *   device <uuid> <total> <used> <reserved> <name...> one GPU (bytes)
 *   process <device index> <pid> <bytes> [<bytes per second>]
 *   minor <device index> <number>                    the device's /dev/nvidiaN number
 *                                                    (default: its index)
 *   process_info_bytes 32                            write the 32-byte process entries
 *                                                    of CUDA 12.2-era drivers (default 24)
 *
 * A process with a growth rate holds bytes + rate * (seconds since
 * nvmlInit_v2), and its device's used memory grows with it, so a test can
 * watch `top` flag a leak without a GPU. Built a second time with
 * STAND_IN_NVML_WITHOUT_PROCESS_LIST to play a driver too old for gpuleak.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct StandInDevice* nvmlDevice_t;

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

enum { kMaxDevices = 8, kMaxProcesses = 64 };

struct StandInProcess {
  unsigned pid;
  double bytes;
  double bytes_per_s;
};

struct StandInDevice {
  char uuid[96];
  char name[96];
  double total, used, reserved;
  unsigned minor;
  int process_count;
  struct StandInProcess processes[kMaxProcesses];
};

static struct StandInDevice g_devices[kMaxDevices];
static int g_device_count;
static int g_init_error;
static int g_process_info_bytes = 24;
static double g_init_time_s;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void load_state(void) {
  const char* path = getenv("GPULEAK_STAND_IN_NVML_STATE");
  g_device_count = 0;
  g_init_error = 0;
  g_process_info_bytes = 24;
  if (!path) return;
  FILE* file = fopen(path, "r");
  if (!file) return;
  char line[512];
  while (fgets(line, sizeof line, file)) {
    line[strcspn(line, "\n")] = 0;
    if (strncmp(line, "init_error ", 11) == 0) {
      g_init_error = atoi(line + 11);
    } else if (strncmp(line, "process_info_bytes ", 19) == 0) {
      g_process_info_bytes = atoi(line + 19) == 32 ? 32 : 24;
    } else if (strncmp(line, "device ", 7) == 0 && g_device_count < kMaxDevices) {
      struct StandInDevice* d = &g_devices[g_device_count];
      memset(d, 0, sizeof *d);
      int name_at = 0;
      if (sscanf(line + 7, "%95s %lf %lf %lf %n", d->uuid, &d->total, &d->used, &d->reserved,
                 &name_at) >= 4) {
        snprintf(d->name, sizeof d->name, "%s", line + 7 + name_at);
        d->minor = (unsigned)g_device_count;
        ++g_device_count;
      }
    } else if (strncmp(line, "minor ", 6) == 0) {
      int index = -1;
      unsigned minor = 0;
      if (sscanf(line + 6, "%d %u", &index, &minor) == 2 && index >= 0 && index < g_device_count)
        g_devices[index].minor = minor;
    } else if (strncmp(line, "process ", 8) == 0) {
      int index = -1;
      struct StandInProcess p = {0, 0, 0};
      if (sscanf(line + 8, "%d %u %lf %lf", &index, &p.pid, &p.bytes, &p.bytes_per_s) >= 3 &&
          index >= 0 && index < g_device_count && g_devices[index].process_count < kMaxProcesses) {
        g_devices[index].processes[g_devices[index].process_count++] = p;
      }
    }
  }
  fclose(file);
}

static double device_used(const struct StandInDevice* d) {
  double used = d->used;
  for (int i = 0; i < d->process_count; ++i) {
    used += d->processes[i].bytes_per_s * (now_s() - g_init_time_s);
  }
  return used;
}

static struct StandInDevice* device_of(nvmlDevice_t device) {
  for (int i = 0; i < g_device_count; ++i) {
    if (device == &g_devices[i]) return &g_devices[i];
  }
  return NULL;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  load_state();
  g_init_time_s = now_s();
  return g_init_error;
}

EXPORT nvmlReturn_t nvmlShutdown(void) { return 0; }

EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case 0:
      return "Success";
    case 9:
      return "Driver Not Loaded";
    case 2:
      return "Invalid Argument";
    case 7:
      return "Insufficient Size";
    default:
      return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  snprintf(version, length, "stand-in");
  return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  load_state();
  *count = (unsigned)g_device_count;
  return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= (unsigned)g_device_count) return 2;
  *device = &g_devices[index];
  return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  struct StandInDevice* d = device_of(device);
  if (!d) return 2;
  snprintf(uuid, length, "%s", d->uuid);
  return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  struct StandInDevice* d = device_of(device);
  if (!d) return 2;
  snprintf(name, length, "%s", d->name);
  return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  struct StandInDevice* d = device_of(device);
  if (!d) return 2;
  *minor = d->minor;
  return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  struct StandInDevice* d = device_of(device);
  if (!d) return 2;
  double used = device_used(d) + d->reserved;
  memory->total = (unsigned long long)d->total;
  memory->used = (unsigned long long)used;
  memory->free = (unsigned long long)(d->total - used);
  return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  struct StandInDevice* d = device_of(device);
  if (!d) return 2;
  if (memory->version != ((unsigned)sizeof(nvmlMemory_v2_t) | (2U << 24U))) return 25;
  double used = device_used(d);
  memory->total = (unsigned long long)d->total;
  memory->reserved = (unsigned long long)d->reserved;
  memory->used = (unsigned long long)used;
  memory->free = (unsigned long long)(d->total - used - d->reserved);
  return 0;
}

#ifndef STAND_IN_NVML_WITHOUT_PROCESS_LIST
static double process_bytes(const struct StandInProcess* p) {
  return p->bytes + p->bytes_per_s * (now_s() - g_init_time_s);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int* count,
                                                            nvmlProcessInfo_t* infos) {
  struct StandInDevice* d = device_of(device);
  if (!d || !count) return 2;
  if (*count < (unsigned)d->process_count) {
    *count = (unsigned)d->process_count;
    return 7;
  }
  for (int i = 0; i < d->process_count; ++i) {
    /* Entries are g_process_info_bytes apart; the 32-byte layout adds the
       confidential-computing protected memory (0 here) after the instance ids. */
    unsigned char* entry = (unsigned char*)infos + (size_t)i * (size_t)g_process_info_bytes;
    nvmlProcessInfo_t info;
    info.pid = d->processes[i].pid;
    info.usedGpuMemory = (unsigned long long)process_bytes(&d->processes[i]);
    info.gpuInstanceId = 0xFFFFFFFFu;
    info.computeInstanceId = 0xFFFFFFFFu;
    memcpy(entry, &info, sizeof info);
    if (g_process_info_bytes == 32) memset(entry + sizeof info, 0, 8);
  }
  *count = (unsigned)d->process_count;
  return 0;
}
#endif
