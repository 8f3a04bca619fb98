// Roles of a job's processes from what is known of each (process_roles.h).
#include "analysis/processes/process_roles.h"

#include <gtest/gtest.h>

#include "analysis/model/annotation_values.h"

namespace gpuleak::analysis {
namespace {

Frame python_frame(const std::string& file, const std::string& function, bool internal) {
  Frame f;
  f.language = Frame::Language::kPython;
  f.file = file;
  f.function = function;
  f.internal = internal;
  return f;
}

RoleEvidence child_of(int parent, std::vector<std::string> argv) {
  RoleEvidence e;
  e.pid = 200;
  e.parent_pid = parent;
  e.argv = std::move(argv);
  e.comm = "python3";
  return e;
}

RoleEvidence program(int pid) {
  RoleEvidence e;
  e.pid = pid;
  e.parent_pid = 1;
  e.argv = {"python3", "train.py"};
  return e;
}

TEST(ProcessRoles, the_program_run_started_is_the_main_program) {
  RoleEvidence main = program(100);
  EXPECT_EQ(classify_role(main, nullptr, 100).kind, RoleKind::kMain);
}

TEST(ProcessRoles, the_packages_annotation_names_a_dataloader_worker_with_its_id) {
  RoleEvidence main = program(100);
  RoleEvidence worker = child_of(100, {"python3", "train.py"});
  worker.role = read_process_role(R"({"dataloader_worker": {"id": 2, "num_workers": 4}})");
  ProcessRole role = classify_role(worker, &main, 100);
  EXPECT_EQ(role.kind, RoleKind::kDataLoaderWorker);
  EXPECT_EQ(role.text, "DataLoader worker 2 of PID 100");
  EXPECT_EQ(role.of_pid, 100);
}

TEST(ProcessRoles, pytorchs_thread_name_or_its_worker_loop_name_a_dataloader_worker) {
  RoleEvidence main = program(100);
  RoleEvidence named = child_of(100, {"python3", "train.py"});
  named.comm = "pt_data_worker";
  EXPECT_EQ(classify_role(named, &main, 100).kind, RoleKind::kDataLoaderWorker);
  RoleEvidence looped = child_of(100, {"python3", "train.py"});
  looped.frames = {python_frame("/work/dataset.py", "Images.__getitem__", false),
                   python_frame("/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py",
                                "_worker_loop", true)};
  EXPECT_EQ(classify_role(looped, &main, 100).kind, RoleKind::kDataLoaderWorker);
}

TEST(ProcessRoles, a_forkserver_child_works_for_the_program_that_started_the_forkserver) {
  RoleEvidence main = program(100);
  RoleEvidence forkserver =
      child_of(100, {"python3", "-c", "from multiprocessing.forkserver import main; main(9)"});
  forkserver.pid = 150;
  RoleEvidence worker =
      child_of(150, {"python3", "-c", "from multiprocessing.forkserver import main; main(9)"});
  worker.comm = "pt_data_worker";
  ProcessRole role = classify_role(worker, &forkserver, 100);
  EXPECT_EQ(role.kind, RoleKind::kDataLoaderWorker);
  EXPECT_EQ(role.of_pid, 100);
  EXPECT_EQ(classify_role(forkserver, &main, 100).kind, RoleKind::kMultiprocessingHelper);
}

TEST(ProcessRoles, pool_workers_spawn_processes_and_plain_children_are_told_apart) {
  RoleEvidence main = program(100);
  RoleEvidence pool = child_of(
      100, {"python3", "-c",
            "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
            "--multiprocessing-fork"});
  pool.role =
      read_process_role(R"({"multiprocessing": {"name": "SpawnPoolWorker-3", "parent_pid": 100}})");
  EXPECT_EQ(classify_role(pool, &main, 100).text, "pool worker of PID 100 (SpawnPoolWorker-3)");

  RoleEvidence spawned = child_of(100, pool.argv);
  spawned.frames = {
      python_frame("/work/train.py", "train", false),
      python_frame("/usr/lib/python3/dist-packages/torch/multiprocessing/spawn.py", "_wrap", true)};
  EXPECT_EQ(classify_role(spawned, &main, 100).text,
            "torch.multiprocessing.spawn process of PID 100");

  RoleEvidence process = child_of(100, pool.argv);
  EXPECT_EQ(classify_role(process, &main, 100).kind, RoleKind::kMultiprocessingWorker);

  RoleEvidence tracker =
      child_of(100, {"python3", "-c", "from multiprocessing.resource_tracker import main;main(5)"});
  EXPECT_EQ(classify_role(tracker, &main, 100).kind, RoleKind::kMultiprocessingHelper);

  RoleEvidence fork = child_of(100, main.argv);
  EXPECT_EQ(classify_role(fork, &main, 100).kind, RoleKind::kForkedChild);

  RoleEvidence helper = child_of(100, {"/usr/bin/orted", "--hnp"});
  EXPECT_EQ(classify_role(helper, &main, 100).text, "subprocess of PID 100 (orted)");
}

TEST(ProcessRoles, a_rank_is_named_by_rank_and_world_size) {
  RoleEvidence main = program(100);
  RoleEvidence rank = child_of(100, {"python3", "train.py", "--local-rank=1"});
  rank.distributed = read_distributed_rank(R"({"rank": 1, "local_rank": 1, "world_size": 2})");
  EXPECT_EQ(classify_role(rank, &main, 100).text, "rank 1 of 2");
}

TEST(ProcessRoles, damaged_annotations_are_ignored_not_trusted) {
  RoleEvidence main = program(100);
  RoleEvidence worker = child_of(100, {"/usr/bin/helper"});
  worker.role = read_process_role(R"({"dataloader_worker": "yes", "multiprocessing": [1, 2]})");
  worker.distributed = read_distributed_rank("{not json");
  EXPECT_EQ(classify_role(worker, &main, 100).kind, RoleKind::kSubprocess);
}

}  // namespace
}  // namespace gpuleak::analysis
