#include "monitor/process_ender.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "monitor/proc_scanner.h"
#include "monitor/process_info.h"
#include "real_processes.h"

namespace gpuleak::monitor {
namespace {

std::uint64_t start_ticks_of(pid_t pid) {
  std::string line;
  ProcessInfo info;
  EXPECT_TRUE(read_proc_file("/proc/" + std::to_string(pid) + "/stat", line));
  EXPECT_TRUE(parse_proc_stat(line, sysconf(_SC_PAGESIZE), info));
  return info.start_ticks;
}

// A child that has installed its signal disposition before the test goes on.
std::unique_ptr<testing::Child> start_sleeper(bool ignore_sigterm) {
  pid_t test_pid = getpid();
  int ready[2];
  EXPECT_EQ(pipe(ready), 0);
  auto child = std::make_unique<testing::Child>([&] {
    if (ignore_sigterm) signal(SIGTERM, SIG_IGN);
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    testing::sleep_while_test_runs(test_pid);
  });
  char byte = 0;
  EXPECT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  close(ready[1]);
  return child;
}

TEST(EndProcess, a_process_that_obeys_sigterm_ends_without_sigkill) {
  auto child = start_sleeper(false);
  std::vector<std::string> log;
  EndOutcome outcome = end_process({child->pid(), start_ticks_of(child->pid()), "sleeper"}, 30.0,
                                   [&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ(outcome.result, EndResult::kEndedBySigterm) << outcome.message;
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("SIGTERM"), std::string::npos);
  EXPECT_NE(log[0].find(std::to_string(child->pid())), std::string::npos);
  int status = child->wait();
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(EndProcess, a_process_that_ignores_sigterm_gets_sigkill_after_the_grace_period) {
  auto child = start_sleeper(true);
  std::vector<std::string> log;
  EndOutcome outcome = end_process({child->pid(), start_ticks_of(child->pid()), "stubborn"}, 0.2,
                                   [&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ(outcome.result, EndResult::kEndedBySigkill) << outcome.message;
  ASSERT_EQ(log.size(), 2u);
  EXPECT_NE(log[0].find("SIGTERM"), std::string::npos);
  EXPECT_NE(log[1].find("SIGKILL"), std::string::npos);
  int status = child->wait();
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(EndProcess, a_pid_that_now_names_another_process_is_left_alone) {
  auto child = start_sleeper(false);
  std::vector<std::string> log;
  EndOutcome outcome = end_process({child->pid(), start_ticks_of(child->pid()) + 1, "other"}, 0.2,
                                   [&](const std::string& line) { log.push_back(line); });
  EXPECT_EQ(outcome.result, EndResult::kReplaced);
  EXPECT_TRUE(log.empty());
  EXPECT_TRUE(testing::is_running(child->pid()));
}

TEST(EndProcess, a_process_that_already_exited_is_reported_gone) {
  auto child = start_sleeper(false);
  pid_t pid = child->pid();
  std::uint64_t start = start_ticks_of(pid);
  kill(pid, SIGKILL);
  child->wait();
  std::vector<std::string> log;
  EndOutcome outcome =
      end_process({pid, start, "gone"}, 0.2, [&](const std::string& line) { log.push_back(line); });
  // (kReplaced if the pid was reused in between: either way nothing is sent.)
  EXPECT_TRUE(outcome.result == EndResult::kAlreadyGone || outcome.result == EndResult::kReplaced)
      << outcome.message;
  EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace gpuleak::monitor
