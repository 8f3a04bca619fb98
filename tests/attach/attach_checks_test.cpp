// The refusals made before a process is touched.
#include "attach/attach_checks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "attach/attach.h"

namespace gpuleak::attach {
namespace {

TEST(YamaRefusal, scope_zero_or_no_yama_allows_everything) {
  EXPECT_EQ(yama_refusal(-1, false, false), "");
  EXPECT_EQ(yama_refusal(0, false, false), "");
}

TEST(YamaRefusal, scope_one_allows_ancestors_and_ptrace_capability_only) {
  EXPECT_EQ(yama_refusal(1, false, true), "");
  EXPECT_EQ(yama_refusal(1, true, false), "");
  std::string refusal = yama_refusal(1, false, false);
  EXPECT_NE(refusal.find("ptrace_scope is 1"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("sysctl kernel.yama.ptrace_scope=0"), std::string::npos) << refusal;
}

TEST(YamaRefusal, scope_two_needs_the_capability_and_three_refuses_everyone) {
  EXPECT_EQ(yama_refusal(2, true, false), "");
  EXPECT_NE(yama_refusal(2, false, true).find("only root"), std::string::npos);
  EXPECT_NE(yama_refusal(3, true, true).find("until it reboots"), std::string::npos);
}

TEST(UserNamespaceRefusal, same_or_inner_namespaces_are_left_to_the_other_checks) {
  UserNamespaces namespaces;
  for (auto where : {TargetUserNamespace::kSame, TargetUserNamespace::kInside}) {
    namespaces.target = where;
    namespaces.gpuleak_in_initial = false;
    EXPECT_EQ(user_namespace_refusal(namespaces, "PID 7 (python3)"), "");
  }
  // In the machine's own namespace an unreadable process is another user's
  // or undumpable: the later checks name that.
  namespaces.gpuleak_in_initial = true;
  namespaces.target = TargetUserNamespace::kUnreadable;
  EXPECT_EQ(user_namespace_refusal(namespaces, "PID 7 (python3)"), "");
}

TEST(UserNamespaceRefusal, a_process_outside_a_rootless_container_is_refused_with_what_to_do) {
  UserNamespaces namespaces;
  namespaces.gpuleak_in_initial = false;
  namespaces.gpuleak_uid_outside = 1000;
  namespaces.target = TargetUserNamespace::kUnreadable;
  std::string refusal = user_namespace_refusal(namespaces, "PID 7 (python3)");
  EXPECT_EQ(refusal.find("PID 7 (python3)"), 0U) << refusal;
  EXPECT_NE(refusal.find("rootless container; it is uid 1000 outside"), std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("inside its container (docker exec"), std::string::npos) << refusal;

  namespaces.target = TargetUserNamespace::kOutside;
  refusal = user_namespace_refusal(namespaces, "PID 7 (python3)");
  EXPECT_NE(refusal.find("lives outside gpuleak's user namespace"), std::string::npos) << refusal;
}

TEST(UserNamespaceRefusal, the_same_ids_outside_are_allowed_as_the_kernel_allows_them) {
  UserNamespaces namespaces;
  namespaces.gpuleak_in_initial = false;
  namespaces.target = TargetUserNamespace::kOutside;
  namespaces.same_ids = true;
  EXPECT_EQ(user_namespace_refusal(namespaces, "PID 7 (python3)"), "");
}

TEST(WhyNotAttachable, gpuleak_itself_and_missing_processes_are_refused) {
  EXPECT_NE(why_not_attachable(static_cast<int>(::getpid())).find("is gpuleak itself"),
            std::string::npos);
  EXPECT_NE(why_not_attachable(0).find("no process"), std::string::npos);
  EXPECT_NE(why_not_attachable(4194304 - 3).find("no process"), std::string::npos);
}

TEST(WhyNotAttachable, a_kernel_thread_is_not_a_program) {
  // PID 2 is kthreadd where the PID namespace is the machine's.
  std::string refusal = why_not_attachable(2);
  if (refusal.find("no process") != std::string::npos) GTEST_SKIP() << "no PID 2 in this namespace";
  EXPECT_NE(refusal.find("kernel thread"), std::string::npos) << refusal;
}

TEST(FindPythonInterpreter, a_process_without_cpython_is_named_not_python) {
  PythonInterpreter python;
  std::string why;
  // This test binary runs no Python.
  EXPECT_FALSE(find_python_interpreter(static_cast<int>(::getpid()), &python, &why));
  EXPECT_NE(why.find("is not a Python process"), std::string::npos) << why;
}

}  // namespace
}  // namespace gpuleak::attach
