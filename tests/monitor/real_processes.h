// Real processes for the monitor tests: holders of a stand-in GPU device
// file, a truly orphaned child, an unreaped zombie, a daemon, and the
// Python training job with spawned workers. Every process started here is
// ended by its owner object's destructor, and every long-lived child also
// exits by itself once the test process is gone, so a crashed test leaves
// nothing behind.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/scratch_dir.h"

namespace gpuleak::monitor::testing {

// A scratch directory with files named like NVIDIA's device nodes
// (nvidia0, nvidiactl), and the glob that matches them.
class StandInDevice {
 public:
  StandInDevice();

  const std::string& directory() const { return directory_.path(); }
  std::string glob() const { return directory() + "/nvidia*"; }
  std::string gpu_file() const { return directory() + "/nvidia0"; }
  std::string control_file() const { return directory() + "/nvidiactl"; }

 private:
  gpuleak::testing::ScratchDir directory_;
};

// A forked child running `body`; killed (SIGKILL) and reaped on destruction.
class Child {
 public:
  explicit Child(const std::function<void()>& body);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Reaps the child (it must have exited or be about to); returns its wait status.
  int wait();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Blocks in a child until the test process is gone (then exits), so a
// crashed test leaves no stray behind.
[[noreturn]] void sleep_while_test_runs(pid_t test_pid);

// Opens `path` read-only in the calling process and keeps it open.
void hold_open(const std::string& path);

// A child that holds the stand-in device files open, like a CUDA process.
std::unique_ptr<Child> start_device_holder(const StandInDevice& device);

// A process whose parent has exited: the test forks a parent that starts
// its own process group (as a shell job does), that parent forks a child
// holding the stand-in device and exits; the test reaps the parent, and the
// kernel re-parents the child. `orphan_pid()` is the child.
class Orphan {
 public:
  explicit Orphan(const StandInDevice& device);
  ~Orphan();
  Orphan(const Orphan&) = delete;
  Orphan& operator=(const Orphan&) = delete;

  pid_t orphan_pid() const { return orphan_pid_; }
  pid_t dead_parent_pid() const { return dead_parent_pid_; }

 private:
  pid_t orphan_pid_ = -1;
  pid_t dead_parent_pid_ = -1;
};

// A child that exited and has not been reaped yet.
class Zombie {
 public:
  Zombie();
  ~Zombie();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Polls until `pid`'s state letter satisfies `wanted` or ~10 s pass (a
// bound against hangs, not a timing assertion). Returns the last state
// seen, or 0 when the process is gone.
char wait_for_state(pid_t pid, const std::function<bool(char)>& wanted);
// Polls until `pid`'s parent is not `old_parent` (or ~10 s pass).
pid_t wait_for_new_parent(pid_t pid, pid_t old_parent);
// True while /proc/PID exists and is not a zombie.
bool is_running(pid_t pid);

// The Python training job (tests/monitor/fixtures/training_job.py): a
// parent holding the device, two DataLoader-style workers and one plain
// multiprocessing worker (both started with 'spawn'), each holding the
// device, and one forked child that exited unreaped.
struct TrainingJob {
  std::unique_ptr<Child> process;
  pid_t training_pid = -1;
  std::vector<pid_t> dataloader_worker_pids;
  pid_t multiprocessing_worker_pid = -1;
  pid_t zombie_pid = -1;
};
TrainingJob start_training_job(const StandInDevice& device);

}  // namespace gpuleak::monitor::testing
