// Turns successive snapshots into what the monitor shows: picks the
// processes that matter (those the driver lists, those with an open GPU
// device file, their zombie children, and the pids asked for), names their
// relations, and keeps per-process and per-device series for the trend test.
//
// One snapshot alone gives a sample without trends (doctor uses that).
// Not thread-safe: one owner feeds it, in time order.
#pragma once

#include <set>

#include "monitor/monitor_sample.h"
#include "monitor/snapshot.h"
#include "monitor/trend_tracker.h"
#include "monitor/user_names.h"

namespace gpuleak::monitor {

class Sampler {
 public:
  struct Options {
    TrendTracker::Options trend;
    std::set<int> watch_pids;  // always shown, even without GPU memory or device files
  };

  explicit Sampler(Options options);

  MonitorSample add(const Snapshot& snapshot);

 private:
  Options options_;
  TrendTracker tracker_;
  UserNames users_;
  std::size_t next_index_ = 0;
  double first_time_s_ = 0;
};

}  // namespace gpuleak::monitor
