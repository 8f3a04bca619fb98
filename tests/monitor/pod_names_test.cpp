#include "monitor/pod_names.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/scratch_dir.h"

namespace gpuleak::monitor {
namespace {

using testing::ScratchDir;
using testing::write_text_file;

const std::string kId = "4f3c2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2";
const std::string kOtherId = "aaaa2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2";
const std::string kUid = "0b6c2c8e-5f1d-4c57-9d8e-1a2b3c4d5e6f";
const std::string kOtherUid = "11111111-2222-3333-4444-555555555555";

// Lays out a kubelet log root as a node has it: one directory per pod with
// one directory per container, and the containers/ links' names.
void make_pod(const ScratchDir& root, const std::string& ns, const std::string& pod,
              const std::string& uid, const std::string& container, const std::string& id) {
  std::string pod_dir = root.file("pods/" + ns + "_" + pod + "_" + uid);
  mkdir(root.file("pods").c_str(), 0755);
  mkdir(root.file("containers").c_str(), 0755);
  mkdir(pod_dir.c_str(), 0755);
  mkdir((pod_dir + "/" + container).c_str(), 0755);
  write_text_file(pod_dir + "/" + container + "/0.log", "");
  std::string link =
      root.file("containers/" + pod + "_" + ns + "_" + container + "-" + id + ".log");
  ASSERT_EQ(symlink((pod_dir + "/" + container + "/0.log").c_str(), link.c_str()), 0);
}

TEST(PodNames, pod_directory_name_splits_into_namespace_pod_and_uid) {
  auto parsed = parse_pod_directory_name("ml-team_trainer-7d9f-x2x_" + kUid);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->namespace_name, "ml-team");
  EXPECT_EQ(parsed->pod, "trainer-7d9f-x2x");
  EXPECT_EQ(parsed->uid, kUid);
}

TEST(PodNames, container_log_name_splits_into_pod_namespace_container_and_id) {
  auto parsed = parse_container_log_name("trainer-0_ml-team_pytorch-" + kId + ".log");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->pod, "trainer-0");
  EXPECT_EQ(parsed->namespace_name, "ml-team");
  EXPECT_EQ(parsed->container, "pytorch");
  EXPECT_EQ(parsed->container_id, kId);
}

TEST(PodNames, names_of_other_shapes_are_refused) {
  EXPECT_FALSE(parse_pod_directory_name("ml-team_trainer_" + kUid.substr(1)));
  EXPECT_FALSE(parse_pod_directory_name("ml-team_" + kUid));
  EXPECT_FALSE(parse_pod_directory_name("a_b_c_" + kUid));
  EXPECT_FALSE(parse_pod_directory_name("ML_trainer_" + kUid));  // uppercase is not a k8s name
  EXPECT_FALSE(parse_container_log_name("trainer_ml_pytorch-" + kId.substr(1) + ".log"));
  EXPECT_FALSE(parse_container_log_name("trainer_ml_pytorch_" + kId + ".log"));
  EXPECT_FALSE(parse_container_log_name("trainer_ml_pytorch-" + kId + ".txt"));
  EXPECT_FALSE(parse_container_log_name("trainer_pytorch-" + kId + ".log"));
}

TEST(PodNames, finds_pod_and_container_by_uid_and_container_id) {
  ScratchDir root;
  make_pod(root, "ml-team", "trainer-0", kUid, "pytorch", kId);
  make_pod(root, "default", "other", kOtherUid, "sidecar", kOtherId);
  KubeletPodNames pods(root.path());
  pods.refresh();
  auto names = pods.find(kUid, kId);
  ASSERT_TRUE(names);
  EXPECT_EQ(names->namespace_name, "ml-team");
  EXPECT_EQ(names->pod, "trainer-0");
  EXPECT_EQ(names->container, "pytorch");
}

TEST(PodNames, a_container_of_another_pod_is_never_named) {
  ScratchDir root;
  make_pod(root, "ml-team", "trainer-0", kUid, "pytorch", kId);
  make_pod(root, "default", "other", kOtherUid, "sidecar", kOtherId);
  KubeletPodNames pods(root.path());
  pods.refresh();
  // The cgroup says pod kUid but a container id that belongs to another pod.
  auto names = pods.find(kUid, kOtherId);
  ASSERT_TRUE(names);
  EXPECT_EQ(names->pod, "trainer-0");
  EXPECT_EQ(names->container, "");
}

TEST(PodNames, unknown_uid_and_missing_root_give_nothing) {
  ScratchDir root;
  make_pod(root, "ml-team", "trainer-0", kUid, "pytorch", kId);
  KubeletPodNames pods(root.path());
  pods.refresh();
  EXPECT_FALSE(pods.find(kOtherUid, kId));
  EXPECT_FALSE(pods.find("", kId));
  KubeletPodNames nowhere(root.file("absent"));
  nowhere.refresh();
  EXPECT_FALSE(nowhere.find(kUid, kId));
  KubeletPodNames off("");
  off.refresh();
  EXPECT_FALSE(off.find(kUid, kId));
}

TEST(PodNames, a_pod_that_ends_is_forgotten_at_the_next_refresh) {
  ScratchDir root;
  make_pod(root, "ml-team", "trainer-0", kUid, "pytorch", kId);
  KubeletPodNames pods(root.path());
  pods.refresh();
  ASSERT_TRUE(pods.find(kUid, kId));
  std::string pod_dir = root.file("pods/ml-team_trainer-0_" + kUid);
  ASSERT_EQ(unlink((pod_dir + "/pytorch/0.log").c_str()), 0);
  ASSERT_EQ(rmdir((pod_dir + "/pytorch").c_str()), 0);
  ASSERT_EQ(rmdir(pod_dir.c_str()), 0);
  pods.refresh();
  EXPECT_FALSE(pods.find(kUid, kId));
}

}  // namespace
}  // namespace gpuleak::monitor
