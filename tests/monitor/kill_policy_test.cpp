#include "monitor/kill_policy.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpuleak::monitor {
namespace {

ProcessInfo orphan_owned_by(uid_t uid, int pid = 424242) {
  ProcessInfo info;
  info.pid = pid;
  info.ppid = 1;
  info.state = 'S';
  info.uid = uid;
  return info;
}

KillContext caller(uid_t uid, bool all_users = false) {
  KillContext context;
  context.caller_uid = uid;
  context.caller_pid = 5000;
  context.caller_ancestors = {4999, 4000, 1};
  context.all_users = all_users;
  return context;
}

TEST(KillPolicy, allows_the_callers_own_orphan) {
  KillDecision decision = decide_kill(orphan_owned_by(1000), true, false, caller(1000), "alice");
  EXPECT_TRUE(decision.allowed);
  EXPECT_TRUE(decision.reason.empty());
}

TEST(KillPolicy, never_pid_one_even_for_root_with_all_users) {
  ProcessInfo init = orphan_owned_by(0, 1);
  KillDecision decision = decide_kill(init, true, true, caller(0, true), "root");
  EXPECT_FALSE(decision.allowed);
  EXPECT_NE(decision.reason.find("PID 1"), std::string::npos);
}

TEST(KillPolicy, never_a_container_init) {
  KillDecision decision = decide_kill(orphan_owned_by(0), true, true, caller(0, true), "root");
  EXPECT_FALSE(decision.allowed);
  EXPECT_NE(decision.reason.find("container"), std::string::npos);
}

TEST(KillPolicy, never_the_caller_or_its_ancestors) {
  EXPECT_FALSE(
      decide_kill(orphan_owned_by(1000, 5000), true, false, caller(1000), "alice").allowed);
  KillDecision ancestor =
      decide_kill(orphan_owned_by(1000, 4000), true, false, caller(1000), "alice");
  EXPECT_FALSE(ancestor.allowed);
  EXPECT_NE(ancestor.reason.find("ancestor"), std::string::npos);
}

TEST(KillPolicy, the_real_ancestors_of_this_process_are_protected) {
  KillContext context = KillContext::for_this_process(false);
  ASSERT_TRUE(context.caller_ancestors.count(getppid()));
  ProcessInfo parent = orphan_owned_by(getuid(), getppid());
  EXPECT_FALSE(decide_kill(parent, true, false, context, "me").allowed);
}

TEST(KillPolicy, only_orphans) {
  KillDecision decision = decide_kill(orphan_owned_by(1000), false, false, caller(1000), "alice");
  EXPECT_FALSE(decision.allowed);
  EXPECT_NE(decision.reason.find("not an orphan"), std::string::npos);
}

TEST(KillPolicy, never_a_zombie_or_a_kernel_thread) {
  ProcessInfo zombie = orphan_owned_by(1000);
  zombie.state = 'Z';
  EXPECT_FALSE(decide_kill(zombie, true, false, caller(1000), "alice").allowed);
  ProcessInfo kernel = orphan_owned_by(0);
  kernel.kernel_thread = true;
  EXPECT_FALSE(decide_kill(kernel, true, false, caller(0, true), "root").allowed);
}

TEST(KillPolicy, other_users_are_refused_to_ordinary_users_even_with_all_users) {
  KillDecision decision =
      decide_kill(orphan_owned_by(1001), true, false, caller(1000, true), "bob");
  EXPECT_FALSE(decision.allowed);
  EXPECT_NE(decision.reason.find("bob"), std::string::npos);
}

TEST(KillPolicy, root_needs_all_users_for_other_users_orphans) {
  KillDecision without = decide_kill(orphan_owned_by(1001), true, false, caller(0), "bob");
  EXPECT_FALSE(without.allowed);
  EXPECT_NE(without.reason.find("--all-users"), std::string::npos);
  EXPECT_TRUE(decide_kill(orphan_owned_by(1001), true, false, caller(0, true), "bob").allowed);
  EXPECT_TRUE(decide_kill(orphan_owned_by(0), true, false, caller(0), "root").allowed);
}

TEST(KillPolicy, unknown_owner_is_refused) {
  ProcessInfo unknown = orphan_owned_by(1000);
  unknown.uid.reset();
  EXPECT_FALSE(decide_kill(unknown, true, false, caller(0, true), "?").allowed);
}

}  // namespace
}  // namespace gpuleak::monitor
