#include "monitor/nvml_library.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace gpuleak::monitor {
namespace {

// Points NVML at the stand-in library and writes its state file.
class StandInNvml {
 public:
  StandInNvml(const char* library, const std::string& state) {
    char pattern[] = "/tmp/gpuleak-stand-in-nvmlXXXXXX";
    int fd = mkstemp(pattern);
    close(fd);
    state_file_ = pattern;
    std::ofstream(state_file_) << state;
    setenv("GPULEAK_STAND_IN_NVML_STATE", state_file_.c_str(), 1);
    setenv(kNvmlLibraryEnv, library, 1);
  }
  ~StandInNvml() {
    unsetenv(kNvmlLibraryEnv);
    unsetenv("GPULEAK_STAND_IN_NVML_STATE");
    std::remove(state_file_.c_str());
  }

 private:
  std::string state_file_;
};

TEST(NvmlLibrary, reads_devices_and_processes_through_dlopen) {
  StandInNvml nvml(GPULEAK_STAND_IN_NVML,
                   "device GPU-aaaa 85899345920 2147483648 536870912 Stand-in H200\n"
                   "device GPU-bbbb 85899345920 0 536870912 Stand-in H200\n"
                   "process 0 4242 1073741824\n"
                   "process 0 4343 1073741824\n");
  NvmlLibrary library;
  ASSERT_TRUE(library.available()) << library.unavailable_reason();
  EXPECT_EQ(library.driver_version(), "stand-in");
  GpuReadResult read = library.read_devices();
  EXPECT_TRUE(read.error.empty()) << read.error;
  ASSERT_EQ(read.devices.size(), 2u);
  const GpuDevice& first = read.devices[0];
  EXPECT_EQ(first.uuid, "GPU-aaaa");
  EXPECT_EQ(first.name, "Stand-in H200");
  EXPECT_EQ(first.memory_total_bytes, 85899345920u);
  EXPECT_EQ(first.memory_used_bytes, 2147483648u);
  EXPECT_TRUE(first.reserved_reported);
  EXPECT_EQ(first.memory_reserved_bytes, 536870912u);
  ASSERT_EQ(first.processes.size(), 2u);
  EXPECT_EQ(first.processes[1].pid, 4343);
  EXPECT_EQ(first.processes[1].memory_bytes, 1073741824u);
  EXPECT_TRUE(read.devices[1].processes.empty());
}

// Drivers of the CUDA 12.2 era write 32-byte entries where others write 24:
// read with the wrong stride, every process after the first is garbage (the
// go-nvml and pynvml reports), so a job's workers would go missing.
TEST(NvmlLibrary, every_process_of_a_32_byte_process_list_reads_right) {
  StandInNvml nvml(GPULEAK_STAND_IN_NVML,
                   "process_info_bytes 32\n"
                   "device GPU-aaaa 85899345920 4294967296 0 Stand-in H200\n"
                   "process 0 4242 654311424\n"
                   "process 0 4343 654311424\n"
                   "process 0 4444 1073741824\n");
  NvmlLibrary library;
  ASSERT_TRUE(library.available()) << library.unavailable_reason();
  GpuReadResult read = library.read_devices();
  ASSERT_EQ(read.devices.size(), 1u);
  const auto& processes = read.devices[0].processes;
  ASSERT_EQ(processes.size(), 3u);
  EXPECT_EQ(processes[0].pid, 4242);
  EXPECT_EQ(processes[1].pid, 4343);
  EXPECT_EQ(processes[1].memory_bytes, 654311424u);
  EXPECT_EQ(processes[2].pid, 4444);
  EXPECT_EQ(processes[2].memory_bytes, 1073741824u);
}

TEST(NvmlLibrary, a_growing_process_reads_larger_later) {
  StandInNvml nvml(GPULEAK_STAND_IN_NVML,
                   "device GPU-aaaa 85899345920 0 0 Stand-in\n"
                   "process 0 4242 0 1073741824\n");
  NvmlLibrary library;
  ASSERT_TRUE(library.available());
  std::uint64_t before = library.read_devices().devices.at(0).processes.at(0).memory_bytes.value();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::uint64_t after = library.read_devices().devices.at(0).processes.at(0).memory_bytes.value();
  EXPECT_GT(after, before);
}

TEST(NvmlLibrary, a_missing_library_is_explained_not_fatal) {
  setenv(kNvmlLibraryEnv, "/nonexistent/libnvidia-ml.so.1", 1);
  NvmlLibrary library;
  unsetenv(kNvmlLibraryEnv);
  EXPECT_FALSE(library.available());
  EXPECT_NE(library.unavailable_reason().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(library.unavailable_reason().find("driver"), std::string::npos);
  EXPECT_FALSE(library.read_devices().error.empty());
}

TEST(NvmlLibrary, a_driver_that_is_not_loaded_is_explained) {
  StandInNvml nvml(GPULEAK_STAND_IN_NVML, "init_error 9\n");
  NvmlLibrary library;
  EXPECT_FALSE(library.available());
  EXPECT_NE(library.unavailable_reason().find("Driver Not Loaded"), std::string::npos)
      << library.unavailable_reason();
}

TEST(NvmlLibrary, a_driver_without_the_process_list_call_is_named_too_old) {
  StandInNvml nvml(GPULEAK_STAND_IN_NVML_TOO_OLD, "device GPU-aaaa 1 0 0 x\n");
  NvmlLibrary library;
  EXPECT_FALSE(library.available());
  EXPECT_NE(library.unavailable_reason().find("nvmlDeviceGetComputeRunningProcesses_v3"),
            std::string::npos)
      << library.unavailable_reason();
}

}  // namespace
}  // namespace gpuleak::monitor
