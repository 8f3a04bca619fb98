// Time series of byte counts, one per key, each kept for a sliding window,
// and the shared robust trend test (quantity/trend.h) applied to them.
//
// Keys are whatever the caller uses to name a series (a process identity
// and a device, a GPU uuid). A series that is not updated in a round is
// dropped at end_round(), so an exited process does not linger and a reused
// pid (a new key) starts a fresh series.
//
// Not thread-safe: one owner updates and reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "quantity/trend.h"

namespace gpuleak::monitor {

struct TrendSummary {
  std::size_t points = 0;        // samples in the window
  double slope_bytes_per_s = 0;  // Theil–Sen slope over the window
  bool leak = false;             // the trend test says it keeps growing
  // When leaking and a limit is known: how long until the limit is reached
  // at the current slope.
  std::optional<double> seconds_until_full;
};

class TrendTracker {
 public:
  struct Options {
    double window_s = 300;
    // Growth slower than this is not called a leak, however steady.
    double min_growth_bytes_per_s = 16 * 1024;
    std::size_t min_points = 8;
    // The test is O(n^2) in points: a longer window is thinned evenly to this
    // many, so a 5-minute window at 1 Hz costs what 90 samples cost.
    std::size_t max_points = 90;
  };

  explicit TrendTracker(Options options);

  // Adds a point to the series `key`.
  void add(const std::string& key, double time_s, double bytes);
  // The trend of `key` now; `headroom_bytes` is what is left before the
  // limit (free device memory), used for seconds_until_full.
  TrendSummary trend(const std::string& key, std::optional<double> headroom_bytes) const;
  // Drops series that got no point since the previous end_round().
  void end_round();

  std::size_t series_count() const { return series_.size(); }

 private:
  struct Series {
    std::deque<double> times_s;
    std::deque<double> bytes;
    bool touched = false;
  };
  Options options_;
  quantity::TrendOptions trend_options_;
  std::map<std::string, Series> series_;
};

}  // namespace gpuleak::monitor
