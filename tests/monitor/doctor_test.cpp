#include "monitor/doctor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "monitor/sample_history.h"
#include "monitor/sample_reader.h"
#include "real_processes.h"

namespace gpuleak::monitor {
namespace {

using testing::StandInDevice;

const Finding* finding_for(const DoctorReport& report, int pid) {
  for (const auto& finding : report.findings) {
    if (finding.pid == pid) return &finding;
  }
  return nullptr;
}

std::string verdict_of(const DoctorReport& report, int pid) {
  for (std::size_t i = 0; i < report.sample.processes.size(); ++i) {
    if (report.sample.processes[i].pid == pid) return report.verdicts[i];
  }
  return "(not listed)";
}

DoctorReport diagnose_now(SampleReader& source, RawSample* keep = nullptr) {
  RawSample raw = source.take(ProcScanner::HandleScope::kAll);
  SampleHistory history({});
  Sample sample = history.add(raw);
  DoctorReport report = diagnose(raw, sample);
  if (keep) *keep = std::move(raw);
  return report;
}

TEST(Doctor, classifies_an_orphan_a_zombie_and_workers_of_real_processes) {
  StandInDevice device;
  testing::Orphan orphan(device);
  testing::TrainingJob job = testing::start_training_job(device);
  SampleReader source(DeviceFilePattern(device.glob()), /*use_nvml=*/false);
  DoctorReport report = diagnose_now(source);

  const Finding* orphan_finding = finding_for(report, orphan.orphan_pid());
  ASSERT_NE(orphan_finding, nullptr);
  EXPECT_EQ(orphan_finding->kind, FindingKind::kOrphan);
  EXPECT_EQ(orphan_finding->severity, Severity::kAction);
  EXPECT_TRUE(orphan_finding->can_kill);
  EXPECT_FALSE(orphan_finding->evidence.empty());
  EXPECT_FALSE(orphan_finding->cause.empty());
  EXPECT_FALSE(orphan_finding->action.empty());
  EXPECT_EQ(verdict_of(report, orphan.orphan_pid()), "orphan");

  const Finding* zombie_finding = finding_for(report, job.zombie_pid);
  ASSERT_NE(zombie_finding, nullptr);
  EXPECT_EQ(zombie_finding->kind, FindingKind::kZombie);
  EXPECT_NE(zombie_finding->action.find(std::to_string(job.training_pid)), std::string::npos);
  EXPECT_FALSE(zombie_finding->can_kill);

  for (pid_t worker : job.dataloader_worker_pids) {
    const Finding* finding = finding_for(report, worker);
    ASSERT_NE(finding, nullptr) << worker;
    EXPECT_EQ(finding->kind, FindingKind::kWorkerContext);
    EXPECT_EQ(finding->severity, Severity::kWarning);
    EXPECT_NE(finding->summary.find("DataLoader worker of PID " + std::to_string(job.training_pid)),
              std::string::npos)
        << finding->summary;
    EXPECT_FALSE(finding->can_kill);
  }
  const Finding* plain = finding_for(report, job.multiprocessing_worker_pid);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->kind, FindingKind::kWorkerContext);
  // It shares the stand-in GPU with its parent, so it costs a second context there.
  EXPECT_EQ(plain->severity, Severity::kWarning);

  EXPECT_EQ(finding_for(report, job.training_pid), nullptr);
  EXPECT_EQ(verdict_of(report, job.training_pid), "ok");
  EXPECT_TRUE(report.has_problems());
}

TEST(Doctor, a_healthy_holder_raises_no_problem) {
  StandInDevice device;
  auto holder = testing::start_device_holder(device);
  SampleReader source(DeviceFilePattern(device.glob()), false);
  DoctorReport report = diagnose_now(source);
  EXPECT_EQ(verdict_of(report, holder->pid()), "worker");  // a forked copy of this test
  EXPECT_FALSE(report.has_problems());
  for (const auto& finding : report.findings) EXPECT_EQ(finding.severity, Severity::kInfo);
}

int absent_pid() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  int pid_max = 4194304;
  in >> pid_max;
  return pid_max + 1;  // no process can have it
}

TEST(Doctor, driver_pids_from_another_namespace_and_unaccounted_memory) {
  StandInDevice device;
  SampleReader source(DeviceFilePattern(device.glob()), false);
  RawSample raw = source.take(ProcScanner::HandleScope::kAll);
  // What a driver would say from outside this PID namespace: a pid that
  // does not exist here, and one that exists here but is a different process.
  raw.nvml.available = true;
  GpuDevice gpu;
  gpu.uuid = "GPU-stand-in";
  gpu.name = "Stand-in GPU";
  gpu.memory_total_bytes = 80ULL << 30;
  gpu.memory_used_bytes = 30ULL << 30;
  gpu.reserved_reported = true;
  gpu.processes = {{absent_pid(), 12ULL << 30}, {getpid(), 2ULL << 30}};
  raw.devices.push_back(gpu);
  SampleHistory history({});
  DoctorReport report = diagnose(raw, history.add(raw));

  const Finding* absent = finding_for(report, absent_pid());
  ASSERT_NE(absent, nullptr);
  EXPECT_EQ(absent->kind, FindingKind::kOtherNamespace);
  EXPECT_EQ(absent->memory_bytes, 12ULL << 30);
  const Finding* collision = finding_for(report, getpid());
  ASSERT_NE(collision, nullptr);
  EXPECT_EQ(collision->kind, FindingKind::kOtherNamespace);

  const Finding* unaccounted = nullptr;
  for (const auto& finding : report.findings) {
    if (finding.kind == FindingKind::kUnaccountedMemory) unaccounted = &finding;
  }
  ASSERT_NE(unaccounted, nullptr);
  EXPECT_EQ(unaccounted->memory_bytes, 16ULL << 30);
  EXPECT_EQ(unaccounted->device_index, 0u);
}

TEST(Doctor, a_little_driver_bookkeeping_is_not_unaccounted_memory) {
  StandInDevice device;
  SampleReader source(DeviceFilePattern(device.glob()), false);
  RawSample raw = source.take(ProcScanner::HandleScope::kAll);
  raw.nvml.available = true;
  GpuDevice gpu;
  gpu.uuid = "GPU-stand-in";
  gpu.memory_total_bytes = 80ULL << 30;
  gpu.memory_used_bytes = (2ULL << 30) + (100ULL << 20);
  gpu.reserved_reported = true;
  gpu.processes = {{absent_pid(), 2ULL << 30}};
  raw.devices.push_back(gpu);
  SampleHistory history({});
  DoctorReport report = diagnose(raw, history.add(raw));
  for (const auto& finding : report.findings) {
    EXPECT_NE(finding.kind, FindingKind::kUnaccountedMemory);
  }
}

}  // namespace
}  // namespace gpuleak::monitor
