#include "monitor/pod_cgroup.h"

#include <gtest/gtest.h>

namespace gpuleak::monitor {
namespace {

const std::string kId = "4f3c2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2";
const std::string kUid = "0b6c2c8e-5f1d-4c57-9d8e-1a2b3c4d5e6f";
const std::string kUidUnderscores = "0b6c2c8e_5f1d_4c57_9d8e_1a2b3c4d5e6f";

TEST(PodCgroup, systemd_driver_burstable_pod) {
  std::string text = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                     kUidUnderscores + ".slice/cri-containerd-" + kId + ".scope\n";
  EXPECT_EQ(pod_uid_from_cgroup(text), kUid);
}

TEST(PodCgroup, systemd_driver_guaranteed_pod_has_no_qos_level) {
  std::string text =
      "0::/kubepods.slice/kubepods-pod" + kUidUnderscores + ".slice/crio-" + kId + ".scope\n";
  EXPECT_EQ(pod_uid_from_cgroup(text), kUid);
}

TEST(PodCgroup, cgroupfs_driver_besteffort_and_guaranteed) {
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/besteffort/pod" + kUid + "/" + kId + "\n"), kUid);
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/pod" + kUid + "/" + kId + "\n"), kUid);
}

TEST(PodCgroup, cgroup_v1_lines_name_the_pod_when_there_is_no_unified_line) {
  std::string text = "12:memory:/kubepods/burstable/pod" + kUid + "/" + kId +
                     "\n11:cpu,cpuacct:/kubepods/burstable/pod" + kUid + "/" + kId + "\n";
  EXPECT_EQ(pod_uid_from_cgroup(text), kUid);
}

TEST(PodCgroup, nested_kubelet_of_kind_under_a_docker_scope) {
  std::string text = "0::/system.slice/docker-" + kId +
                     ".scope/kubelet.slice/kubelet-kubepods.slice/"
                     "kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" +
                     kUidUnderscores + ".slice/cri-containerd-" + kId + ".scope\n";
  EXPECT_EQ(pod_uid_from_cgroup(text), kUid);
}

TEST(PodCgroup, uppercase_uid_is_given_lowercase) {
  std::string upper = "0B6C2C8E-5F1D-4C57-9D8E-1A2B3C4D5E6F";
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/pod" + upper + "/" + kId + "\n"), kUid);
}

TEST(PodCgroup, host_and_plain_container_paths_have_no_pod) {
  EXPECT_EQ(pod_uid_from_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n"), "");
  EXPECT_EQ(pod_uid_from_cgroup("0::/system.slice/docker-" + kId + ".scope\n"), "");
  EXPECT_EQ(pod_uid_from_cgroup("0::/\n"), "");
  EXPECT_EQ(pod_uid_from_cgroup(""), "");
}

// Unknown shapes give no pod, never a guess.
TEST(PodCgroup, paths_of_unknown_shape_give_no_pod) {
  // The pod's own cgroup (no container below it): the pause or a stray, not a container.
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/burstable/pod" + kUid + "\n"), "");
  // Deeper than one container part below the pod.
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/pod" + kUid + "/" + kId + "/extra\n"), "");
  // A UID of the wrong length or with a stray character.
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/pod" + kUid.substr(1) + "/" + kId + "\n"), "");
  EXPECT_EQ(
      pod_uid_from_cgroup("0::/kubepods/podzb6c2c8e-5f1d-4c57-9d8e-1a2b3c4d5e6f/" + kId + "\n"),
      "");
  // Dashes where systemd writes underscores, and the reverse.
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods.slice/kubepods-pod" + kUid + ".slice/c.scope\n"), "");
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/pod" + kUidUnderscores + "/" + kId + "\n"), "");
  // A systemd pod slice that does not repeat its parent's name.
  EXPECT_EQ(
      pod_uid_from_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" +
                          kUidUnderscores + ".slice/c.scope\n"),
      "");
  // "pod<uid>" outside a kubepods root is someone else's naming.
  EXPECT_EQ(pod_uid_from_cgroup("0::/mypods/pod" + kUid + "/" + kId + "\n"), "");
  // A QoS level that does not exist.
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/golden/pod" + kUid + "/" + kId + "\n"), "");
  // No controller fields.
  EXPECT_EQ(pod_uid_from_cgroup("/kubepods/pod" + kUid + "/" + kId + "\n"), "");
}

}  // namespace
}  // namespace gpuleak::monitor
