#include "monitor/container_id.h"

#include <gtest/gtest.h>

namespace gpuleak::monitor {
namespace {

const std::string kId = "4f3c2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2";

TEST(ContainerId, docker_with_systemd_cgroup_driver) {
  EXPECT_EQ(container_id_from_cgroup("0::/system.slice/docker-" + kId + ".scope\n"), kId);
}

TEST(ContainerId, docker_with_cgroupfs_driver_on_cgroup_v1) {
  std::string text = "12:memory:/docker/" + kId + "\n11:cpu,cpuacct:/docker/" + kId + "\n";
  EXPECT_EQ(container_id_from_cgroup(text), kId);
}

TEST(ContainerId, kubernetes_with_containerd_takes_the_container_not_the_pod) {
  std::string text =
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234abcd_5678_90ef.slice/"
      "cri-containerd-" +
      kId + ".scope\n";
  EXPECT_EQ(container_id_from_cgroup(text), kId);
}

TEST(ContainerId, podman_and_crio_scopes) {
  EXPECT_EQ(container_id_from_cgroup("0::/machine.slice/libpod-" + kId + ".scope\n"), kId);
  EXPECT_EQ(container_id_from_cgroup("0::/kubepods/pod1/crio-" + kId + ".scope\n"), kId);
}

TEST(ContainerId, host_processes_and_cgroup_namespaces_have_none) {
  EXPECT_EQ(container_id_from_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/\n"), "");
  EXPECT_EQ(container_id_from_cgroup(""), "");
}

TEST(ContainerId, a_longer_hex_run_is_not_an_id) {
  EXPECT_EQ(container_id_from_cgroup("0::/x/" + kId + "ab\n"), "");
}

TEST(ContainerId, uppercase_is_normalized_and_short_form_has_twelve_digits) {
  std::string upper = kId;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  EXPECT_EQ(container_id_from_cgroup("0::/docker/" + upper + "\n"), kId);
  EXPECT_EQ(short_container_id(kId), kId.substr(0, 12));
}

}  // namespace
}  // namespace gpuleak::monitor
