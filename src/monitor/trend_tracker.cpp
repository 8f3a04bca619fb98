#include "monitor/trend_tracker.h"

#include <algorithm>
#include <vector>

namespace gpuleak::monitor {

TrendTracker::TrendTracker(Options options) : options_(options) {
  trend_options_.min_slope = options.min_growth_bytes_per_s;
  trend_options_.min_points = options.min_points;
  trend_options_.max_points = options.max_points;
}

void TrendTracker::add(const std::string& key, double time_s, double bytes) {
  Series& series = series_[key];
  series.times_s.push_back(time_s);
  series.bytes.push_back(bytes);
  series.touched = true;
  while (!series.times_s.empty() && series.times_s.front() < time_s - options_.window_s) {
    series.times_s.pop_front();
    series.bytes.pop_front();
  }
}

TrendSummary TrendTracker::trend(const std::string& key,
                                 std::optional<double> headroom_bytes) const {
  TrendSummary summary;
  auto it = series_.find(key);
  if (it == series_.end()) return summary;
  const Series& series = it->second;
  summary.points = series.times_s.size();
  if (summary.points < 2) return summary;
  // Most series hold still most of the time (an allocator that has warmed
  // up); a flat series needs no statistics.
  auto [lowest, highest] = std::minmax_element(series.bytes.begin(), series.bytes.end());
  if (*lowest == *highest) return summary;
  // Relative times keep the intercept small and the arithmetic exact enough.
  std::vector<double> x(series.times_s.begin(), series.times_s.end());
  double origin = x.front();
  for (double& t : x) t -= origin;
  std::vector<double> y(series.bytes.begin(), series.bytes.end());
  quantity::Trend fit = quantity::fit_trend(x, y, trend_options_);
  summary.slope_bytes_per_s = fit.slope;
  summary.leak = fit.growing;
  if (summary.leak && headroom_bytes && fit.slope > 0) {
    summary.seconds_until_full = *headroom_bytes > 0 ? *headroom_bytes / fit.slope : 0.0;
  }
  return summary;
}

void TrendTracker::end_round() {
  for (auto it = series_.begin(); it != series_.end();) {
    if (!it->second.touched) {
      it = series_.erase(it);
    } else {
      it->second.touched = false;
      ++it;
    }
  }
}

}  // namespace gpuleak::monitor
