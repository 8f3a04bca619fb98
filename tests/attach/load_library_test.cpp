// attach::load_library against a real process that runs no Python: a
// library is loaded into `sleep` while it sleeps, its entry runs there, and
// the program then sleeps its full time and exits as it would have.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "attach/attach.h"

extern char** environ;

namespace gpuleak::attach {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(LoadLibrary, a_library_loads_into_a_sleeping_program_which_then_ends_as_it_would_have) {
  char seconds[] = "2";
  char program[] = "sleep";
  char* argv[] = {program, seconds, nullptr};
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawnp(&pid, "sleep", nullptr, nullptr, argv, environ), 0);
  auto started = std::chrono::steady_clock::now();
  // Until it waits in clock_nanosleep (230) or nanosleep (35).
  std::string syscall_file = "/proc/" + std::to_string(pid) + "/syscall";
  for (int i = 0; i < 200; ++i) {
    std::string now = read_file(syscall_file);
    if (now.starts_with("230 ") || now.starts_with("35 ")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string marker = ::testing::TempDir() + "gpuleak-marker-" + std::to_string(pid);
  long result = 0;
  std::string why;
  bool loaded = load_library(pid, GPULEAK_TEST_MARKER_LIBRARY, {"GPULEAK_TEST_MARKER=" + marker},
                             "gpuleak_test_write_marker", Limits{}, &result, &why);
  if (!loaded && why.find("not permitted") != std::string::npos) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    GTEST_SKIP() << "ptrace is not allowed here: " << why;
  }
  ASSERT_TRUE(loaded) << why;
  EXPECT_EQ(result, 7);
  EXPECT_EQ(read_file(marker), "loaded " + std::to_string(pid) + "\n");
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Its interrupted sleep was restarted, not cut short.
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(1900));
  std::remove(marker.c_str());
}

// The collector's own entry for programs without Python: it starts its
// session thread and returns; the thread answers through the control
// folder (on this machine, without a GPU driver, most likely that the
// collector could not start recording), and the program ends as it would.
TEST(LoadLibrary, the_collectors_attach_session_answers_in_a_program_without_python) {
  std::string collector = std::string(GPULEAK_BINARY_DIR) + "/libgpuleak_collector.so";
  if (::access(collector.c_str(), R_OK) != 0) GTEST_SKIP() << "no collector in this build";
  char seconds[] = "3";
  char program[] = "sleep";
  char* argv[] = {program, seconds, nullptr};
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawnp(&pid, "sleep", nullptr, nullptr, argv, environ), 0);
  std::string syscall_file = "/proc/" + std::to_string(pid) + "/syscall";
  for (int i = 0; i < 200; ++i) {
    std::string now = read_file(syscall_file);
    if (now.starts_with("230 ") || now.starts_with("35 ")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string control = ::testing::TempDir() + "gpuleak-attach-control-" + std::to_string(pid);
  std::string traces = control + "-traces";
  ASSERT_EQ(::mkdir(control.c_str(), 0700), 0);
  long result = 0;
  std::string why;
  bool loaded = load_library(pid, collector,
                             {"GPULEAK_TRACE_DIR=" + traces, "GPULEAK_ATTACH_CONTROL=" + control,
                              "GPULEAK_ATTACH_DURATION_S=1"},
                             "gpuleak_attach_start", Limits{}, &result, &why);
  if (!loaded && why.find("not permitted") != std::string::npos) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    GTEST_SKIP() << "ptrace is not allowed here: " << why;
  }
  ASSERT_TRUE(loaded) << why;
  EXPECT_EQ(result, 1);
  std::string answer;
  for (int i = 0; i < 400 && answer.empty(); ++i) {
    answer = read_file(control + "/failed.json") + read_file(control + "/stopped.json");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(answer.empty()) << "the session thread wrote neither failed.json nor stopped.json";
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::filesystem::remove_all(control);
  std::filesystem::remove_all(traces);
}

// A program whose only thread never waits in a system call (it computes):
// the search for a thread gives up at its bound, says why, and leaves the
// program running and untraced.
TEST(LoadLibrary, a_busy_program_is_given_up_on_within_the_bound_and_left_untraced) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(60);  // never outlives the test by much
    volatile unsigned long spins = 0;
    for (;;) spins = spins + 1;
  }
  Limits limits;
  limits.find_waiting_thread = std::chrono::milliseconds(400);
  long result = 0;
  std::string why;
  auto started = std::chrono::steady_clock::now();
  bool loaded = load_library(pid, GPULEAK_TEST_MARKER_LIBRARY, {}, "gpuleak_test_write_marker",
                             limits, &result, &why);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_FALSE(loaded);
  EXPECT_NE(why.find("waits in a system call that is safe to load a library from within 400 ms"),
            std::string::npos)
      << why;
  EXPECT_GE(took, std::chrono::milliseconds(400));  // it kept looking until the bound
  EXPECT_LT(took, std::chrono::seconds(3));
  std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  EXPECT_NE(status.find("TracerPid:\t0\n"), std::string::npos) << status;
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "the program must still run";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// A program that is gone is said to be so at once, not searched for.
TEST(LoadLibrary, a_program_that_ended_is_named_at_once) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  long result = 0;
  std::string why;
  auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(load_library(pid, GPULEAK_TEST_MARKER_LIBRARY, {}, "gpuleak_test_write_marker",
                            Limits{}, &result, &why));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace gpuleak::attach
