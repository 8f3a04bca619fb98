// The samples the monitor shows, made from successive raw samples (what
// SampleReader read), and the history the trends are fitted over: picks the
// processes that matter (those the driver lists, those with an open GPU
// device file, their zombie children, and the pids asked for), names their
// relations, and keeps per-process and per-device series for the trend test.
//
// One raw sample alone gives a sample without trends (doctor uses that).
// Not thread-safe: one owner feeds it, in time order.
#pragma once

#include <set>

#include "monitor/sample.h"
#include "monitor/sample_reader.h"
#include "monitor/trend_tracker.h"
#include "monitor/user_names.h"

namespace gpuleak::monitor {

class SampleHistory {
 public:
  struct Options {
    TrendTracker::Options trend;
    std::set<int> watch_pids;  // always shown, even without GPU memory or device files
  };

  explicit SampleHistory(Options options);

  Sample add(const RawSample& raw);

 private:
  Options options_;
  TrendTracker tracker_;
  UserNames users_;
  std::size_t next_index_ = 0;
  double first_time_s_ = 0;
};

}  // namespace gpuleak::monitor
