// A job whose processes ran on several hosts (analysis/processes/job_analysis.h):
// PIDs repeat across hosts (each node's, or each container's, PID
// namespace), so a process is its host and its PID.
#include <gtest/gtest.h>

#include "analysis/processes/job_analysis.h"

namespace gpuleak::analysis {
namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

ProcessReport traced(const std::string& host, std::uint32_t pid, std::uint32_t parent_pid,
                     const std::string& command_line) {
  ProcessReport r;
  r.process.hostname = host;
  r.process.pid = pid;
  r.process.parent_pid = parent_pid;
  r.process.command_line = command_line;
  r.process.start_monotonic_ns = 10 * kSecond;
  r.allocations = 10;
  r.cuda_use.contexts_created = 1;
  r.duration_s = 5;
  return r;
}

// node-a's `gpuleak run` saw its main program (PID 100) and a child (PID 101)
// that outlived it holding 512 MiB; node-b's folder has traces only, of its
// own PIDs 100 and 101.
JobObservations node_a_observations() {
  JobObservations o;
  o.main_pid = 100;
  o.start_monotonic_ns = 10 * kSecond;
  o.nvml_available = true;
  o.processes = {{100, 0, 1, "python3", {"python3", "train.py"}, 10 * kSecond},
                 {101, 0, 100, "python3", {"python3", "-c", "serve"}, 11 * kSecond}};
  for (int i = 0; i < 8; ++i) {
    ProcessSample s;
    s.time_ns = (10 + i) * kSecond;
    s.alive = {{101, 'S', 100}};
    if (i < 5) s.alive.push_back({100, 'R', 1});
    s.gpu = {{101, 0, std::uint64_t{512} << 20}};
    o.samples.push_back(s);
  }
  o.main_exit_ns = 15 * kSecond;
  o.main_exit_status = 0;
  o.grace_end_ns = 17 * kSecond;
  o.grace_waited_s = 2;
  o.alive_after_grace = {101};
  return o;
}

TEST(JobHosts, processes_of_two_hosts_with_the_same_pids_stay_apart) {
  std::vector<ProcessReport> reports = {traced("node-a", 100, 1, "python3 train.py"),
                                        traced("node-a", 101, 100, "python3 -c serve"),
                                        traced("node-b", 100, 7, "python3 train.py --node-rank 1"),
                                        traced("node-b", 101, 100, "python3 -c serve")};
  JobReport job = analyze_job(reports, node_a_observations());

  ASSERT_EQ(job.processes.size(), 4u);
  EXPECT_EQ(job.main_pid, 100);
  EXPECT_EQ(job.main_host, "node-a");
  const JobProcess* main_a = nullptr;
  const JobProcess* b_100 = nullptr;
  const JobProcess* b_101 = nullptr;
  for (const JobProcess& p : job.processes) {
    if (p.host == "node-a" && p.pid == 100) main_a = &p;
    if (p.host == "node-b" && p.pid == 100) b_100 = &p;
    if (p.host == "node-b" && p.pid == 101) b_101 = &p;
  }
  ASSERT_TRUE(main_a && b_100 && b_101);
  EXPECT_EQ(main_a->role.kind, RoleKind::kMain);
  EXPECT_EQ(&job.processes.front(), main_a);  // main first
  // node-b's PID 100 is not the main program, and node-a's samples are not its.
  EXPECT_NE(b_100->role.kind, RoleKind::kMain);
  EXPECT_EQ(b_100->command_line, "python3 train.py --node-rank 1");
  EXPECT_FALSE(b_100->first_seen_s.has_value());
  EXPECT_EQ(b_100->device_memory.samples, 0u);
  EXPECT_FALSE(b_101->alive_at_end);

  // The orphan is node-a's PID 101 only.
  ASSERT_EQ(job.findings.size(), 1u);
  EXPECT_EQ(job.findings[0].kind, "orphan");
  EXPECT_EQ(job.findings[0].pids, (std::vector<int>{101}));
  EXPECT_EQ(job.findings[0].host, "node-a");
  EXPECT_EQ(job.findings[0].bytes_total, std::uint64_t{512} << 20);
}

TEST(JobHosts, without_observations_each_host_keeps_its_own_parents) {
  // The main program is guessed: the earliest traced process whose parent on
  // its own host is not traced. node-b's PID 101 has parent 100 on node-b.
  std::vector<ProcessReport> reports = {traced("node-b", 101, 100, "python3 worker.py"),
                                        traced("node-a", 100, 1, "python3 train.py"),
                                        traced("node-b", 100, 1, "python3 train.py")};
  reports[0].process.start_monotonic_ns = 5 * kSecond;  // earliest, but its parent is traced
  reports[1].process.start_monotonic_ns = 8 * kSecond;
  JobReport job = analyze_job(reports, std::nullopt);
  EXPECT_EQ(job.main_pid, 100);
  EXPECT_EQ(job.main_host, "node-a");
  ASSERT_EQ(job.processes.size(), 3u);
}

}  // namespace
}  // namespace gpuleak::analysis
