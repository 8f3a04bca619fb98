// FlowEnvironment: checkpoints, rollback and branch unions give what copying
// the whole environment per branch gave.
#include "lint/flow_environment.h"

#include <gtest/gtest.h>

namespace gpuleak::lint {
namespace {

TEST(lint_flow_environment, rollback_restores_bound_unbound_and_zero_bit_names) {
  FlowEnvironment env;
  env.assign("loss", 3);
  env.add("holder", 0);  // bound to no bits: not the same as unbound
  auto at = env.open();
  env.assign("loss", 1);
  env.erase("holder");
  env.assign("fresh", 2);
  env.assign("loss", 4);
  std::vector<FlowEnvironment::Change> changes = env.changes_since(at);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].key, "loss");
  EXPECT_EQ(changes[0].before.bits, 3);
  EXPECT_EQ(changes[0].after.bits, 4);
  EXPECT_TRUE(changes[1].before.bound);
  EXPECT_FALSE(changes[1].after.bound);
  env.rollback_to(at);
  env.close(at);
  EXPECT_EQ(env.get("loss"), 3);
  ASSERT_NE(env.find("holder"), nullptr);
  EXPECT_EQ(*env.find("holder"), 0);
  EXPECT_EQ(env.find("fresh"), nullptr);
}

TEST(lint_flow_environment, branch_union_keeps_the_start_only_where_a_branch_left_it) {
  FlowEnvironment env;
  env.assign("a", 1);
  env.assign("b", 1);
  auto at = env.open();
  BranchUnion with_else;
  env.assign("a", 2);  // then: a changes, b stays
  with_else.add_branch(env.changes_since(at));
  env.rollback_to(at);
  env.assign("a", 4);  // else: a changes too, and b is dropped
  env.erase("b");
  with_else.add_branch(env.changes_since(at));
  env.rollback_to(at);
  with_else.apply(env, false);
  // a: changed by every branch, the start no longer counts; b: the first
  // branch left it as it was.
  EXPECT_EQ(env.get("a"), 6);
  EXPECT_EQ(env.get("b"), 1);
  env.rollback_to(at);
  BranchUnion without_else;
  env.assign("a", 2);
  without_else.add_branch(env.changes_since(at));
  env.rollback_to(at);
  without_else.apply(env, true);
  EXPECT_EQ(env.get("a"), 3);  // the condition may be false: the start counts
  env.close(at);
}

TEST(lint_flow_environment, nested_checkpoints_undo_only_their_own_changes) {
  FlowEnvironment env;
  auto outer = env.open();
  env.assign("x", 1);
  auto inner = env.open();
  env.assign("x", 2);
  env.assign("y", 2);
  env.rollback_to(inner);
  env.close(inner);
  EXPECT_EQ(env.get("x"), 1);
  EXPECT_EQ(env.find("y"), nullptr);
  ASSERT_EQ(env.changes_since(outer).size(), 1u);
  env.close(outer);
  // No checkpoint open: nothing is journaled, the state stays.
  env.assign("z", 5);
  EXPECT_EQ(env.get("z"), 5);
}

}  // namespace
}  // namespace gpuleak::lint
