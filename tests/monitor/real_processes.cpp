#include "real_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "monitor/proc_scanner.h"
#include "monitor/process_info.h"

namespace gpuleak::monitor::testing {

namespace {

constexpr auto kPollStep = std::chrono::milliseconds(20);
constexpr int kPollSteps = 500;  // ~10 s: a bound against hangs, not a timing check

bool read_stat(pid_t pid, ProcessInfo& info) {
  std::string line;
  return read_proc_file("/proc/" + std::to_string(pid) + "/stat", line) &&
         parse_proc_stat(line, sysconf(_SC_PAGESIZE), info);
}

}  // namespace

StandInDevice::StandInDevice() {
  gpuleak::testing::write_text_file(gpu_file(), "stand-in for /dev/nvidia0\n");
  gpuleak::testing::write_text_file(control_file(), "stand-in for /dev/nvidiactl\n");
}

Child::Child(const std::function<void()>& body) {
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    body();
    _exit(0);
  }
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int Child::wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  return status;
}

void sleep_while_test_runs(pid_t test_pid) {
  for (;;) {
    ProcessInfo info;
    if (kill(test_pid, 0) != 0 || !read_stat(test_pid, info) || info.is_zombie()) _exit(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void hold_open(const std::string& path) {
  // Deliberately leaked: the descriptor is the point.
  if (open(path.c_str(), O_RDONLY) < 0) _exit(3);
}

std::unique_ptr<Child> start_device_holder(const StandInDevice& device) {
  pid_t test_pid = getpid();
  int ready[2];
  if (pipe(ready) != 0) throw std::runtime_error("pipe failed");
  auto child = std::make_unique<Child>([&] {
    close(ready[0]);
    hold_open(device.gpu_file());
    hold_open(device.control_file());
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    sleep_while_test_runs(test_pid);
  });
  close(ready[1]);
  char byte = 0;
  if (read(ready[0], &byte, 1) != 1) throw std::runtime_error("device holder did not start");
  close(ready[0]);
  return child;
}

Orphan::Orphan(const StandInDevice& device) {
  pid_t test_pid = getpid();
  int channel[2];
  if (pipe(channel) != 0) throw std::runtime_error("pipe failed");
  dead_parent_pid_ = fork();
  if (dead_parent_pid_ < 0) throw std::runtime_error("fork failed");
  if (dead_parent_pid_ == 0) {
    // The parent-to-be leads its own process group, as a shell job does.
    setpgid(0, 0);
    if (fork() == 0) {
      close(channel[0]);
      hold_open(device.gpu_file());
      hold_open(device.control_file());
      pid_t self = getpid();
      if (write(channel[1], &self, sizeof self) != sizeof self) _exit(4);
      sleep_while_test_runs(test_pid);
    }
    _exit(0);  // the parent dies, leaving its child behind
  }
  close(channel[1]);
  if (read(channel[0], &orphan_pid_, sizeof orphan_pid_) != sizeof orphan_pid_) {
    throw std::runtime_error("orphan did not start");
  }
  close(channel[0]);
  waitpid(dead_parent_pid_, nullptr, 0);
  wait_for_new_parent(orphan_pid_, dead_parent_pid_);
}

Orphan::~Orphan() {
  if (orphan_pid_ > 0 && is_running(orphan_pid_)) {
    kill(orphan_pid_, SIGKILL);
    wait_for_state(orphan_pid_, [](char state) { return state == 'Z'; });
  }
}

Zombie::Zombie() {
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) _exit(0);
  wait_for_state(pid_, [](char state) { return state == 'Z'; });
}

Zombie::~Zombie() { waitpid(pid_, nullptr, 0); }

char wait_for_state(pid_t pid, const std::function<bool(char)>& wanted) {
  char last = 0;
  for (int step = 0; step < kPollSteps; ++step) {
    ProcessInfo info;
    if (!read_stat(pid, info)) return 0;
    last = info.state;
    if (wanted(last)) return last;
    std::this_thread::sleep_for(kPollStep);
  }
  return last;
}

pid_t wait_for_new_parent(pid_t pid, pid_t old_parent) {
  ProcessInfo info;
  for (int step = 0; step < kPollSteps; ++step) {
    if (!read_stat(pid, info)) return 0;
    if (info.ppid != old_parent) return info.ppid;
    std::this_thread::sleep_for(kPollStep);
  }
  return info.ppid;
}

bool is_running(pid_t pid) {
  ProcessInfo info;
  return read_stat(pid, info) && !info.is_zombie();
}

TrainingJob start_training_job(const StandInDevice& device) {
  TrainingJob job;
  std::string ready_file = device.directory() + "/training-job.json";
  std::string script = std::string(GPULEAK_SOURCE_DIR) + "/tests/monitor/fixtures/training_job.py";
  std::string device_file = device.gpu_file();
  job.process = std::make_unique<Child>([&] {
    execl("/usr/bin/python3", "python3", script.c_str(), device_file.c_str(), ready_file.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  });
  // Python with three spawned interpreters starts in a second or two; the
  // bound only keeps a broken fixture from hanging the suite.
  for (int step = 0; step < kPollSteps * 3 && !std::filesystem::exists(ready_file); ++step) {
    std::this_thread::sleep_for(kPollStep);
  }
  std::ifstream in(ready_file);
  if (!in) throw std::runtime_error("training_job.py did not report ready");
  nlohmann::json state = nlohmann::json::parse(in);
  job.training_pid = state["training"].get<pid_t>();
  job.dataloader_worker_pids = state["dataloader_workers"].get<std::vector<pid_t>>();
  job.multiprocessing_worker_pid = state["multiprocessing_worker"].get<pid_t>();
  job.zombie_pid = state["zombie"].get<pid_t>();
  wait_for_state(job.zombie_pid, [](char s) { return s == 'Z'; });
  return job;
}

}  // namespace gpuleak::monitor::testing
