#include "monitor/sample_history.h"

#include <gtest/gtest.h>

#include "monitor/trend_tracker.h"

namespace gpuleak::monitor {
namespace {

constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint64_t kMiB = 1ULL << 20;

TEST(TrendTracker, steady_growth_is_a_leak_with_time_until_full) {
  TrendTracker tracker({});
  for (int i = 0; i < 20; ++i) {
    tracker.add("p", i, 1e9 + 64.0 * kMiB * i);
    tracker.end_round();
  }
  TrendSummary trend = tracker.trend("p", 640.0 * kMiB);
  EXPECT_TRUE(trend.leak);
  EXPECT_EQ(trend.points, 20u);
  EXPECT_DOUBLE_EQ(trend.slope_bytes_per_s, 64.0 * kMiB);
  ASSERT_TRUE(trend.seconds_until_full.has_value());
  EXPECT_DOUBLE_EQ(*trend.seconds_until_full, 10.0);
}

TEST(TrendTracker, flat_and_warm_up_then_plateau_are_not_leaks) {
  TrendTracker tracker({});
  for (int i = 0; i < 40; ++i) {
    tracker.add("flat", i, 5e8);
    // An allocator that grows for a while and then holds still.
    tracker.add("plateau", i, i < 10 ? 1e8 * i : 1e9);
    tracker.end_round();
  }
  EXPECT_FALSE(tracker.trend("flat", 1e9).leak);
  EXPECT_FALSE(tracker.trend("flat", 1e9).seconds_until_full.has_value());
  EXPECT_FALSE(tracker.trend("plateau", 1e9).leak);
}

TEST(TrendTracker, growth_below_the_minimum_is_not_a_leak) {
  TrendTracker::Options options;
  options.min_growth_bytes_per_s = 1024 * 1024;
  TrendTracker tracker(options);
  for (int i = 0; i < 30; ++i) {
    tracker.add("slow", i, 1e6 + 1000.0 * i);  // 1000 B/s, steady but tiny
    tracker.end_round();
  }
  EXPECT_FALSE(tracker.trend("slow", 1e12).leak);
  EXPECT_NEAR(tracker.trend("slow", 1e12).slope_bytes_per_s, 1000.0, 1e-6);
}

TEST(TrendTracker, too_few_points_give_no_verdict) {
  TrendTracker tracker({});
  for (int i = 0; i < 5; ++i) {
    tracker.add("new", i, 1e9 * (i + 1));
    tracker.end_round();
  }
  EXPECT_FALSE(tracker.trend("new", 1e12).leak);
}

TEST(TrendTracker, window_forgets_old_points_and_rounds_drop_silent_series) {
  TrendTracker::Options options;
  options.window_s = 10;
  TrendTracker tracker(options);
  for (int i = 0; i < 30; ++i) {
    tracker.add("p", i, 100.0);
    if (i < 3) tracker.add("gone", i, 1.0);
    tracker.end_round();
  }
  EXPECT_EQ(tracker.trend("p", std::nullopt).points, 11u);
  EXPECT_EQ(tracker.trend("gone", std::nullopt).points, 0u);
  EXPECT_EQ(tracker.series_count(), 1u);
}

// A raw sample made by hand: one GPU and the processes of a real-looking table.
RawSample synthetic(double time_s, std::uint64_t device_used, std::vector<GpuProcessUsage> users,
                    std::vector<ProcessInfo> processes) {
  RawSample raw;
  raw.monotonic_s = time_s;
  raw.unix_time_ms = 1700000000000 + static_cast<std::int64_t>(time_s * 1000);
  raw.nvml.available = true;
  GpuDevice device;
  device.index = 0;
  device.uuid = "GPU-test";
  device.name = "Test GPU";
  device.memory_total_bytes = 80 * kGiB;
  device.memory_used_bytes = device_used;
  device.reserved_reported = true;
  device.processes = std::move(users);
  raw.devices.push_back(device);
  for (auto& info : processes) raw.table.processes[info.pid] = info;
  raw.host.known = true;
  raw.host.total_bytes = 64 * kGiB;
  raw.host.available_bytes = 32 * kGiB;
  raw.own_pid = 1;
  return raw;
}

ProcessInfo process(int pid, int ppid, std::uint64_t start_ticks, std::uint64_t rss_bytes) {
  ProcessInfo info;
  info.pid = pid;
  info.ppid = ppid;
  info.pgid = ppid;
  info.sid = ppid;
  info.state = 'S';
  info.comm = "python3";
  info.argv = {"python3", "train.py"};
  info.start_ticks = start_ticks;
  info.rss_bytes = rss_bytes;
  info.uid = 0;
  info.handle_scan = HandleScan::kScanned;
  info.device_handle_count = 3;
  info.device_files = {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"};
  return info;
}

TEST(SampleHistory, a_process_whose_gpu_memory_grows_is_flagged_with_time_until_full) {
  SampleHistory history({});
  Sample last;
  ProcessInfo launcher = process(50, 1, 10, kGiB);  // the parent: no GPU of its own
  launcher.device_handle_count = 0;
  launcher.device_files.clear();
  for (int i = 0; i < 15; ++i) {
    std::uint64_t leaker = 2 * kGiB + static_cast<std::uint64_t>(i) * 64 * kMiB;
    last = history.add(
        synthetic(i, leaker + kGiB, {{100, leaker}, {200, std::uint64_t{kGiB}}},
                  {process(100, 50, 1000, kGiB), process(200, 50, 1001, kGiB), launcher}));
  }
  ASSERT_EQ(last.processes.size(), 2u);
  const ProcessView& top = last.processes[0];
  EXPECT_EQ(top.pid, 100);  // most GPU memory first
  EXPECT_TRUE(top.gpu_trend.leak);
  EXPECT_DOUBLE_EQ(top.gpu_trend.slope_bytes_per_s, 64.0 * kMiB);
  ASSERT_TRUE(top.gpu_trend.seconds_until_full.has_value());
  double free_bytes = 80.0 * kGiB - (2.0 * kGiB + 14 * 64.0 * kMiB + kGiB);
  EXPECT_NEAR(*top.gpu_trend.seconds_until_full, free_bytes / (64.0 * kMiB), 1e-6);
  EXPECT_FALSE(top.rss_trend.leak);
  EXPECT_FALSE(last.processes[1].gpu_trend.leak);
  EXPECT_TRUE(last.devices[0].used.leak);
  EXPECT_EQ(last.devices[0].unaccounted_bytes, 0u);
  EXPECT_EQ(last.index, 14u);
  EXPECT_DOUBLE_EQ(last.elapsed_s, 14.0);
}

TEST(SampleHistory, a_reused_pid_starts_a_new_series) {
  SampleHistory history({});
  Sample last;
  for (int i = 0; i < 20; ++i) {
    // The same pid, but a new process (new start time) from sample 10 on.
    std::uint64_t start = i < 10 ? 1000 : 5000;
    std::uint64_t bytes = kGiB + static_cast<std::uint64_t>(i) * 64 * kMiB;
    last = history.add(synthetic(i, bytes, {{100, bytes}}, {process(100, 1, start, kGiB)}));
  }
  EXPECT_EQ(last.processes[0].gpu_trend.points, 10u);
}

TEST(SampleHistory, memory_no_listed_process_accounts_for_is_reported) {
  SampleHistory history({});
  Sample sample =
      history.add(synthetic(0, 10 * kGiB, {{100, 3 * kGiB}}, {process(100, 1, 1000, kGiB)}));
  EXPECT_EQ(sample.devices[0].accounted_bytes, 3 * kGiB);
  EXPECT_EQ(sample.devices[0].unaccounted_bytes, 7 * kGiB);
}

TEST(SampleHistory, a_pid_the_driver_lists_but_proc_lacks_is_shown_as_not_visible) {
  SampleHistory history({});
  Sample sample = history.add(synthetic(0, 2 * kGiB, {{777777, 2 * kGiB}}, {}));
  ASSERT_EQ(sample.processes.size(), 1u);
  EXPECT_FALSE(sample.processes[0].visible);
  EXPECT_EQ(sample.processes[0].gpu_memory_bytes, 2 * kGiB);
}

TEST(SampleHistory, a_watched_pid_that_does_not_exist_gets_a_note) {
  SampleHistory::Options options;
  options.watch_pids = {999999};
  SampleHistory history(options);
  Sample sample = history.add(synthetic(0, 0, {}, {}));
  ASSERT_EQ(sample.notes.size(), 1u);
  EXPECT_NE(sample.notes[0].find("999999"), std::string::npos);
}

}  // namespace
}  // namespace gpuleak::monitor
