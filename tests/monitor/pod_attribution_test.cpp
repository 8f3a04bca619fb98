// The rules that turn GPU allocations and log-folder names into a
// process's pod labels (pod_attribution.h): a pod is named only where no
// other pod could be meant.
#include "monitor/pod_attribution.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/scratch_dir.h"

namespace gpuleak::monitor {
namespace {

using testing::ScratchDir;
using testing::write_text_file;

const std::string kUid = "0b6c2c8e-5f1d-4c57-9d8e-1a2b3c4d5e6f";
const std::string kOtherUid = "11111111-2222-3333-4444-555555555555";
const std::string kId = "4f3c2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2";
const std::string kOtherId = "aaaa2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2";
const std::string kGpu0 = "GPU-00000000-1111-2222-3333-444444444444";
const std::string kGpu1 = "GPU-55555555-6666-7777-8888-999999999999";

ProcessView process(int pid, const std::string& pod_uid, const std::string& container_id,
                    std::vector<std::string> gpus) {
  ProcessView view;
  view.pid = pid;
  view.info.pid = pid;
  view.info.pod_uid = pod_uid;
  view.info.container_id = container_id;
  for (const auto& uuid : gpus) {
    ProcessDeviceView use;
    use.device_uuid = uuid;
    view.gpu.push_back(use);
  }
  return view;
}

Sample sample_of(std::vector<ProcessView> processes) {
  Sample sample;
  sample.processes = std::move(processes);
  return sample;
}

void expect_names(const PodNamesByPid& names, int pid, const std::string& ns,
                  const std::string& pod, const std::string& container) {
  auto found = names.find(pid);
  ASSERT_NE(found, names.end()) << "pid " << pid << " has no pod";
  EXPECT_EQ(found->second.namespace_name, ns);
  EXPECT_EQ(found->second.pod, pod);
  EXPECT_EQ(found->second.container, container);
}

TEST(PodAttribution, the_allocation_names_the_only_container_on_its_gpu) {
  std::vector<GpuAllocation> allocations = {{kGpu0, "ml", "trainer-0", "pytorch"},
                                            {kGpu1, "ml", "trainer-1", "pytorch"}};
  auto names =
      attribute_pods(sample_of({process(10, kUid, kId, {kGpu0}), process(11, kUid, kId, {kGpu0}),
                                process(20, kOtherUid, kOtherId, {kGpu1})}),
                     nullptr, &allocations);
  expect_names(names, 10, "ml", "trainer-0", "pytorch");
  expect_names(names, 11, "ml", "trainer-0", "pytorch");  // same container, two processes
  expect_names(names, 20, "ml", "trainer-1", "pytorch");
}

TEST(PodAttribution, a_process_outside_a_pod_cgroup_never_gets_the_gpus_pod) {
  std::vector<GpuAllocation> allocations = {{kGpu0, "ml", "trainer-0", "pytorch"}};
  auto names = attribute_pods(sample_of({process(10, "", "", {kGpu0})}), nullptr, &allocations);
  EXPECT_TRUE(names.empty());
}

TEST(PodAttribution, a_gpu_used_by_two_containers_names_neither) {
  std::vector<GpuAllocation> allocations = {{kGpu0, "ml", "trainer-0", "pytorch"}};
  // A second pod reaches the GPU without requesting it: the allocation
  // cannot tell which of the two is trainer-0.
  auto names = attribute_pods(
      sample_of({process(10, kUid, kId, {kGpu0}), process(20, kOtherUid, kOtherId, {kGpu0})}),
      nullptr, &allocations);
  EXPECT_TRUE(names.empty());
  // A host process on the GPU counts as another user too.
  names = attribute_pods(sample_of({process(10, kUid, kId, {kGpu0}), process(30, "", "", {kGpu0})}),
                         nullptr, &allocations);
  EXPECT_TRUE(names.empty());
}

TEST(PodAttribution, a_time_sliced_or_unallocated_gpu_names_nobody) {
  std::vector<GpuAllocation> shared = {{kGpu0, "ml", "trainer-0", "pytorch"},
                                       {kGpu0, "ml", "trainer-1", "pytorch"}};
  EXPECT_TRUE(
      attribute_pods(sample_of({process(10, kUid, kId, {kGpu0})}), nullptr, &shared).empty());
  std::vector<GpuAllocation> other_gpu = {{kGpu1, "ml", "trainer-1", "pytorch"}};
  EXPECT_TRUE(
      attribute_pods(sample_of({process(10, kUid, kId, {kGpu0})}), nullptr, &other_gpu).empty());
}

TEST(PodAttribution, a_process_on_gpus_of_two_containers_names_neither) {
  std::vector<GpuAllocation> allocations = {{kGpu0, "ml", "trainer-0", "pytorch"},
                                            {kGpu1, "ml", "trainer-1", "pytorch"}};
  EXPECT_TRUE(
      attribute_pods(sample_of({process(10, kUid, kId, {kGpu0, kGpu1})}), nullptr, &allocations)
          .empty());
}

// A kubelet log root naming pod kUid "ml/trainer-0", container kId "pytorch".
KubeletPodNames log_names(const ScratchDir& root, const std::string& pod) {
  std::string pod_dir = root.file("pods/ml_" + pod + "_" + kUid);
  mkdir(root.file("pods").c_str(), 0755);
  mkdir(root.file("containers").c_str(), 0755);
  mkdir(pod_dir.c_str(), 0755);
  mkdir((pod_dir + "/pytorch").c_str(), 0755);
  write_text_file(pod_dir + "/pytorch/0.log", "");
  std::string link = root.file("containers/" + pod + "_ml_pytorch-" + kId + ".log");
  EXPECT_EQ(symlink((pod_dir + "/pytorch/0.log").c_str(), link.c_str()), 0);
  KubeletPodNames names(root.path());
  names.refresh();
  return names;
}

TEST(PodAttribution, log_folders_name_pods_where_the_api_was_not_read) {
  ScratchDir root;
  KubeletPodNames logs = log_names(root, "trainer-0");
  auto names = attribute_pods(sample_of({process(10, kUid, kId, {kGpu0})}), &logs, nullptr);
  expect_names(names, 10, "ml", "trainer-0", "pytorch");
}

TEST(PodAttribution, when_the_api_and_the_log_folders_disagree_no_pod_is_named) {
  ScratchDir root;
  KubeletPodNames logs = log_names(root, "notebook-3");
  std::vector<GpuAllocation> allocations = {{kGpu0, "ml", "trainer-0", "pytorch"}};
  auto names = attribute_pods(sample_of({process(10, kUid, kId, {kGpu0})}), &logs, &allocations);
  EXPECT_TRUE(names.empty());
}

TEST(PodAttribution, when_both_agree_the_pod_is_named_once) {
  ScratchDir root;
  KubeletPodNames logs = log_names(root, "trainer-0");
  std::vector<GpuAllocation> allocations = {{kGpu0, "ml", "trainer-0", "pytorch"}};
  auto names = attribute_pods(sample_of({process(10, kUid, kId, {kGpu0})}), &logs, &allocations);
  expect_names(names, 10, "ml", "trainer-0", "pytorch");
  EXPECT_EQ(names.size(), 1U);
}

}  // namespace
}  // namespace gpuleak::monitor
