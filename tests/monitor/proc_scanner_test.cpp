#include "monitor/proc_scanner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "real_processes.h"

namespace gpuleak::monitor {
namespace {

using testing::StandInDevice;

TEST(ProcScanner, finds_the_open_device_files_of_a_holder) {
  StandInDevice device;
  auto holder = testing::start_device_holder(device);
  ProcScanner scanner{DeviceFilePattern(device.glob())};
  ProcessTable table = scanner.scan(ProcScanner::HandleScope::kAll);
  const ProcessInfo* info = table.find(holder->pid());
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->handle_scan, HandleScan::kScanned);
  EXPECT_EQ(info->device_handle_count, 2);
  EXPECT_EQ(info->device_files,
            (std::vector<std::string>{device.gpu_file(), device.control_file()}));
  EXPECT_EQ(info->ppid, getpid());
  ASSERT_TRUE(info->uid.has_value());
  EXPECT_EQ(*info->uid, getuid());
}

TEST(ProcScanner, a_process_without_device_files_holds_none) {
  StandInDevice device;
  auto holder = testing::start_device_holder(device);
  ProcScanner scanner{DeviceFilePattern(device.glob())};
  ProcessTable table = scanner.scan(ProcScanner::HandleScope::kAll);
  const ProcessInfo* self = table.find(getpid());
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(self->handle_scan, HandleScan::kScanned);
  EXPECT_EQ(self->device_handle_count, 0);
  EXPECT_FALSE(self->argv.empty());
}

TEST(ProcScanner, files_outside_the_glob_do_not_count) {
  StandInDevice device;
  std::string other = device.directory() + "/not-a-gpu";
  std::ofstream(other) << "x";
  pid_t test_pid = getpid();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  testing::Child child([&] {
    testing::hold_open(other);
    testing::hold_open(device.gpu_file());
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    testing::sleep_while_test_runs(test_pid);
  });
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  close(ready[1]);
  ProcScanner scanner{DeviceFilePattern(device.glob())};
  ProcessTable table = scanner.scan(ProcScanner::HandleScope::kAll);
  ASSERT_NE(table.find(child.pid()), nullptr);
  EXPECT_EQ(table.find(child.pid())->device_handle_count, 1);
  EXPECT_EQ(table.find(child.pid())->device_files, std::vector<std::string>{device.gpu_file()});
}

TEST(ProcScanner, reports_a_zombie_in_state_z) {
  testing::Zombie zombie;
  ProcScanner scanner{DeviceFilePattern(kDefaultDeviceFileGlob)};
  ProcessTable table = scanner.scan(ProcScanner::HandleScope::kAll);
  const ProcessInfo* info = table.find(zombie.pid());
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->is_zombie());
  EXPECT_EQ(info->ppid, getpid());
}

TEST(ProcScanner, incremental_scans_keep_known_holders_and_find_new_ones) {
  StandInDevice device;
  ProcScanner scanner{DeviceFilePattern(device.glob()), 0.0};
  auto first = testing::start_device_holder(device);
  scanner.scan(ProcScanner::HandleScope::kAll);
  auto second = testing::start_device_holder(device);  // new since the full scan
  ProcessTable table = scanner.scan(ProcScanner::HandleScope::kIncremental);
  ASSERT_NE(table.find(first->pid()), nullptr);
  ASSERT_NE(table.find(second->pid()), nullptr);
  EXPECT_EQ(table.find(first->pid())->device_handle_count, 2);
  EXPECT_EQ(table.find(second->pid())->device_handle_count, 2);
}

TEST(ProcScanner, a_young_holder_that_closes_its_files_is_seen_at_once) {
  StandInDevice device;
  ProcScanner scanner{DeviceFilePattern(device.glob())};  // the child is seconds old: young
  int to_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  pid_t test_pid = getpid();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  testing::Child child([&] {
    int fd = open(device.gpu_file().c_str(), O_RDONLY);
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    if (read(to_child[0], &byte, 1) != 1) _exit(4);
    close(fd);
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    testing::sleep_while_test_runs(test_pid);
  });
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  EXPECT_EQ(
      scanner.scan(ProcScanner::HandleScope::kIncremental).find(child.pid())->device_handle_count,
      1);
  ASSERT_EQ(write(to_child[1], &byte, 1), 1);
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  EXPECT_EQ(
      scanner.scan(ProcScanner::HandleScope::kIncremental).find(child.pid())->device_handle_count,
      0);
  for (int fd : {to_child[0], to_child[1], ready[0], ready[1]}) close(fd);
}

TEST(ProcScanner, an_old_holder_that_closes_its_files_is_seen_at_the_next_full_scan) {
  StandInDevice device;
  // young_process_s = 0: every process counts as old, as on a long-running node.
  ProcScanner scanner{DeviceFilePattern(device.glob()), 0.0};
  int to_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  pid_t test_pid = getpid();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  testing::Child child([&] {
    int fd = open(device.gpu_file().c_str(), O_RDONLY);
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    if (read(to_child[0], &byte, 1) != 1) _exit(4);  // wait for the test
    close(fd);
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    testing::sleep_while_test_runs(test_pid);
  });
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  EXPECT_EQ(
      scanner.scan(ProcScanner::HandleScope::kIncremental).find(child.pid())->device_handle_count,
      1);
  ASSERT_EQ(write(to_child[1], &byte, 1), 1);
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  // Cheap samples carry open files over; the full scan sees the change.
  EXPECT_EQ(
      scanner.scan(ProcScanner::HandleScope::kIncremental).find(child.pid())->device_handle_count,
      1);
  EXPECT_EQ(scanner.scan(ProcScanner::HandleScope::kAll).find(child.pid())->device_handle_count, 0);
  for (int fd : {to_child[0], to_child[1], ready[0], ready[1]}) close(fd);
}

TEST(ProcScanner, incremental_scans_keep_the_state_of_holders_and_their_children_current) {
  StandInDevice device;
  ProcScanner scanner{DeviceFilePattern(device.glob()), 0.0};
  pid_t test_pid = getpid();
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  // A holder whose child exits on request and is never reaped.
  testing::Child holder([&] {
    testing::hold_open(device.gpu_file());
    pid_t worker = fork();
    if (worker == 0) {
      char byte = 0;
      if (read(go[0], &byte, 1) != 1) _exit(4);
      _exit(0);
    }
    if (write(ready[1], &worker, sizeof worker) != sizeof worker) _exit(4);
    testing::sleep_while_test_runs(test_pid);
  });
  pid_t worker = 0;
  ASSERT_EQ(read(ready[0], &worker, sizeof worker), static_cast<ssize_t>(sizeof worker));
  ProcessTable before = scanner.scan(ProcScanner::HandleScope::kAll);
  ASSERT_NE(before.find(worker), nullptr);
  EXPECT_FALSE(before.find(worker)->is_zombie());
  char byte = 1;
  ASSERT_EQ(write(go[1], &byte, 1), 1);
  testing::wait_for_state(worker, [](char s) { return s == 'Z'; });
  ProcessTable after = scanner.scan(ProcScanner::HandleScope::kIncremental);
  ASSERT_NE(after.find(worker), nullptr);
  EXPECT_TRUE(after.find(worker)->is_zombie());
  for (int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
}

TEST(ProcScanner, a_proc_mounted_with_hidepid_is_noted_for_ordinary_users_only) {
  const std::string hidden =
      "22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc "
      "rw,hidepid=invisible\n";
  const std::string open = "22 27 0:21 / /proc rw,relatime - proc proc rw\n";
  EXPECT_NE(hidden_processes_note(hidden, false).find("hidepid"), std::string::npos);
  EXPECT_EQ(hidden_processes_note(hidden, true), "");
  EXPECT_EQ(hidden_processes_note(open, false), "");
  EXPECT_EQ(hidden_processes_note("", false), "");
}

}  // namespace
}  // namespace gpuleak::monitor
