#include "monitor/process_tree.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "real_processes.h"

namespace gpuleak::monitor {
namespace {

using testing::StandInDevice;

ProcessTable scan_all(const StandInDevice& device) {
  ProcScanner scanner{DeviceFilePattern(device.glob())};
  return scanner.scan(ProcScanner::HandleScope::kAll);
}

TEST(OrphanAssessment, a_child_whose_parent_died_is_an_orphan) {
  StandInDevice device;
  testing::Orphan orphan(device);
  ProcessTable table = scan_all(device);
  ProcessTree tree(table);
  const ProcessInfo* info = tree.find(orphan.orphan_pid());
  ASSERT_NE(info, nullptr);
  ASSERT_NE(info->ppid, orphan.dead_parent_pid());
  EXPECT_EQ(info->device_handle_count, 2);
  OrphanAssessment assessment = tree.assess_orphan(orphan.orphan_pid());
  EXPECT_TRUE(assessment.orphaned);
  ASSERT_FALSE(assessment.evidence.empty());
  std::string all;
  for (const auto& line : assessment.evidence) all += line + "\n";
  EXPECT_NE(all.find(std::to_string(orphan.dead_parent_pid())), std::string::npos) << all;
}

TEST(OrphanAssessment, a_child_adopted_by_a_subreaper_is_an_orphan) {
  StandInDevice device;
  pid_t test_pid = getpid();
  int channel[2];
  ASSERT_EQ(pipe(channel), 0);
  // The subreaper plays systemd --user or a container supervisor: it runs
  // in its own session and adopts the orphans of its descendants.
  testing::Child subreaper([&] {
    setsid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t parent = fork();
    if (parent == 0) {
      setpgid(0, 0);
      if (fork() == 0) {
        testing::hold_open(device.gpu_file());
        pid_t self = getpid();
        if (write(channel[1], &self, sizeof self) != sizeof self) _exit(4);
        testing::sleep_while_test_runs(test_pid);
      }
      _exit(0);
    }
    waitpid(parent, nullptr, 0);
    testing::sleep_while_test_runs(test_pid);
  });
  pid_t orphan_pid = 0;
  ASSERT_EQ(read(channel[0], &orphan_pid, sizeof orphan_pid),
            static_cast<ssize_t>(sizeof orphan_pid));
  close(channel[0]);
  close(channel[1]);
  pid_t new_parent = 0;
  for (int i = 0; i < 500 && new_parent != subreaper.pid(); ++i) {
    new_parent = testing::wait_for_new_parent(orphan_pid, 0);
    if (new_parent != subreaper.pid()) usleep(20000);
  }
  ASSERT_EQ(new_parent, subreaper.pid());

  ProcessTable table = scan_all(device);
  ProcessTree tree(table);
  OrphanAssessment assessment = tree.assess_orphan(orphan_pid);
  EXPECT_TRUE(assessment.orphaned);
  EXPECT_FALSE(assessment.evidence.empty());
  kill(orphan_pid, SIGKILL);
}

TEST(OrphanAssessment, a_daemon_that_started_its_own_session_is_not_an_orphan) {
  StandInDevice device;
  pid_t test_pid = getpid();
  int channel[2];
  ASSERT_EQ(pipe(channel), 0);
  testing::Child launcher([&] {
    if (fork() == 0) {
      setsid();  // the classic daemon: double fork, new session
      testing::hold_open(device.gpu_file());
      pid_t self = getpid();
      if (write(channel[1], &self, sizeof self) != sizeof self) _exit(4);
      testing::sleep_while_test_runs(test_pid);
    }
    _exit(0);
  });
  pid_t daemon_pid = 0;
  ASSERT_EQ(read(channel[0], &daemon_pid, sizeof daemon_pid),
            static_cast<ssize_t>(sizeof daemon_pid));
  close(channel[0]);
  close(channel[1]);
  launcher.wait();
  testing::wait_for_new_parent(daemon_pid, launcher.pid());

  ProcessTable table = scan_all(device);
  ProcessTree tree(table);
  ASSERT_NE(tree.find(daemon_pid), nullptr);
  EXPECT_NE(tree.find(daemon_pid)->ppid, launcher.pid());
  EXPECT_FALSE(tree.assess_orphan(daemon_pid).orphaned);
  kill(daemon_pid, SIGKILL);
}

TEST(OrphanAssessment, a_child_with_a_living_parent_is_not_an_orphan) {
  StandInDevice device;
  auto holder = testing::start_device_holder(device);
  ProcessTable table = scan_all(device);
  ProcessTree tree(table);
  EXPECT_FALSE(tree.assess_orphan(holder->pid()).orphaned);
  EXPECT_FALSE(tree.assess_orphan(getpid()).orphaned);
  EXPECT_FALSE(tree.assess_orphan(1).orphaned);
}

TEST(Relations, spawned_dataloader_and_multiprocessing_workers_name_the_training_process) {
  StandInDevice device;
  testing::TrainingJob job = testing::start_training_job(device);
  ProcessTable table = scan_all(device);
  ProcessTree tree(table);
  ASSERT_EQ(job.dataloader_worker_pids.size(), 2u);
  for (pid_t worker : job.dataloader_worker_pids) {
    Relation relation = tree.relation(worker);
    EXPECT_EQ(relation.kind, RelationKind::kDataLoaderWorker) << relation.text;
    EXPECT_EQ(relation.of_pid, job.training_pid);
    EXPECT_EQ(relation.text, "DataLoader worker of PID " + std::to_string(job.training_pid));
    EXPECT_FALSE(tree.assess_orphan(worker).orphaned);
  }
  Relation plain = tree.relation(job.multiprocessing_worker_pid);
  EXPECT_EQ(plain.kind, RelationKind::kMultiprocessingWorker);
  EXPECT_EQ(plain.of_pid, job.training_pid);
  EXPECT_TRUE(is_spawned_worker(*tree.find(job.multiprocessing_worker_pid)));

  const ProcessInfo* training = tree.find(job.training_pid);
  ASSERT_NE(training, nullptr);
  EXPECT_EQ(training->device_handle_count, 1);
  EXPECT_EQ(tree.relation(job.training_pid).kind, RelationKind::kChild);
  const ProcessInfo* zombie = tree.find(job.zombie_pid);
  ASSERT_NE(zombie, nullptr);
  EXPECT_TRUE(zombie->is_zombie());
  EXPECT_EQ(zombie->ppid, job.training_pid);
}

TEST(Relations, a_forked_copy_is_a_forked_child_of_its_parent) {
  StandInDevice device;
  auto holder = testing::start_device_holder(device);  // forked, never exec'd
  ProcessTable table = scan_all(device);
  ProcessTree tree(table);
  Relation relation = tree.relation(holder->pid());
  EXPECT_EQ(relation.kind, RelationKind::kForkedChild);
  EXPECT_EQ(relation.of_pid, getpid());
}

TEST(ProcessTree, ancestors_start_with_the_parent_and_pid_one_is_an_init) {
  StandInDevice device;
  ProcessTable table = scan_all(device);
  ProcessTree tree(table);
  std::vector<int> chain = tree.ancestors(getpid());
  ASSERT_FALSE(chain.empty());
  EXPECT_EQ(chain.front(), getppid());
  EXPECT_TRUE(tree.is_namespace_init(1));
  EXPECT_FALSE(tree.is_namespace_init(getpid()));
  const auto& children = tree.children(getppid());
  EXPECT_NE(std::find(children.begin(), children.end(), getpid()), children.end());
}

}  // namespace
}  // namespace gpuleak::monitor
