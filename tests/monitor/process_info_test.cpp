#include "monitor/process_info.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "monitor/proc_scanner.h"

namespace gpuleak::monitor {
namespace {

TEST(ProcStat, name_with_spaces_and_parentheses_is_read_whole) {
  // Fields after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss
  std::string line =
      "4711 (evil) (name x) S 4700 4700 4600 0 -1 4194560 10 0 0 0 "
      "7 3 0 0 20 0 5 0 123456 1000000 256 18446744073709551615";
  ProcessInfo info;
  ASSERT_TRUE(parse_proc_stat(line, 4096, info));
  EXPECT_EQ(info.pid, 4711);
  EXPECT_EQ(info.comm, "evil) (name x");
  EXPECT_EQ(info.state, 'S');
  EXPECT_EQ(info.ppid, 4700);
  EXPECT_EQ(info.pgid, 4700);
  EXPECT_EQ(info.sid, 4600);
  EXPECT_EQ(info.cpu_ticks, 10u);
  EXPECT_EQ(info.threads, 5);
  EXPECT_EQ(info.start_ticks, 123456u);
  EXPECT_EQ(info.rss_bytes, 256u * 4096u);
  EXPECT_FALSE(info.kernel_thread);
}

TEST(ProcStat, kernel_threads_are_recognized_by_their_flag) {
  std::string line = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0 1";
  ProcessInfo info;
  ASSERT_TRUE(parse_proc_stat(line, 4096, info));
  EXPECT_TRUE(info.kernel_thread);
}

TEST(ProcStat, truncated_line_is_rejected) {
  ProcessInfo info;
  EXPECT_FALSE(parse_proc_stat("12 (x) S 1 1", 4096, info));
  EXPECT_FALSE(parse_proc_stat("garbage", 4096, info));
}

TEST(ProcStatus, innermost_namespace_pid_and_real_uid) {
  std::string status = "Name:\tpython3\nUid:\t1000\t0\t0\t0\nNSpid:\t81234\t57\t1\n";
  EXPECT_EQ(parse_innermost_namespace_pid(status), 1);
  ASSERT_TRUE(parse_real_uid(status).has_value());
  EXPECT_EQ(*parse_real_uid(status), 1000u);
  EXPECT_EQ(parse_innermost_namespace_pid("Name:\tx\n"), 0);
  EXPECT_FALSE(parse_real_uid("Name:\tx\n").has_value());
}

TEST(ProcStat, this_process_reads_back_as_itself) {
  std::string line;
  ASSERT_TRUE(read_proc_file("/proc/self/stat", line));
  ProcessInfo info;
  ASSERT_TRUE(parse_proc_stat(line, sysconf(_SC_PAGESIZE), info));
  EXPECT_EQ(info.pid, getpid());
  EXPECT_EQ(info.ppid, getppid());
  EXPECT_GT(info.rss_bytes, 0u);
  EXPECT_EQ(info.state, 'R');
}

TEST(ProcessInfo, command_line_falls_back_to_the_bracketed_name) {
  ProcessInfo info;
  info.comm = "kworker/0:1";
  EXPECT_EQ(info.command_line(), "[kworker/0:1]");
  info.argv = {"python3", "train.py", "--epochs", "3"};
  EXPECT_EQ(info.command_line(), "python3 train.py --epochs 3");
}

}  // namespace
}  // namespace gpuleak::monitor
