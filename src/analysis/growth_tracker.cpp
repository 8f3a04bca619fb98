#include "analysis/growth_tracker.h"

#include <algorithm>

namespace gpuleak::analysis {

void GrowthTracker::on_alloc(const LiveAllocation& a) {
  Site& site = sites_[a.stack_id];
  site.kind = a.kind;
  site.live_bytes += a.size;
  site.live_allocations += 1;
}

void GrowthTracker::on_free(const LiveAllocation& a) {
  auto it = sites_.find(a.stack_id);
  if (it == sites_.end()) return;
  it->second.live_bytes -= std::min(it->second.live_bytes, a.size);
  if (it->second.live_allocations > 0) it->second.live_allocations -= 1;
}

void GrowthTracker::on_boundary(std::uint64_t step_number, std::uint64_t time_ns) {
  std::uint64_t index = step_numbers_.size();
  step_numbers_.push_back(step_number);
  boundary_times_ns_.push_back(time_ns);
  for (auto& [id, site] : sites_) {
    if (site.series_bytes.empty()) {
      if (site.live_bytes == 0) continue;  // transient within steps: no series
      site.first_index = index;
    }
    site.series_bytes.push_back(site.live_bytes);
    site.series_allocations.push_back(static_cast<std::uint32_t>(site.live_allocations));
  }
}

void GrowthTracker::reset_boundaries() {
  step_numbers_.clear();
  boundary_times_ns_.clear();
  for (auto& [id, site] : sites_) {
    site.series_bytes.clear();
    site.series_allocations.clear();
    site.first_index = 0;
  }
}

std::uint64_t GrowthTracker::post_warmup_boundaries() const {
  std::uint64_t n = step_numbers_.size();
  return n > options_.warmup_steps ? n - options_.warmup_steps : 0;
}

bool GrowthTracker::grows_often_and_throughout(const std::vector<double>& values) const {
  std::size_t n = values.size();
  if (n < 4) return false;
  std::uint64_t increases = 0;
  bool quarter_grew[4] = {false, false, false, false};
  for (std::size_t i = 1; i < n; ++i) {
    if (values[i] > values[i - 1]) {
      ++increases;
      quarter_grew[std::min<std::size_t>(3, 4 * i / n)] = true;
    }
  }
  return increases >= options_.min_increases && quarter_grew[0] && quarter_grew[1] &&
         quarter_grew[2] && quarter_grew[3];
}

std::uint64_t GrowthTracker::window_begin(std::uint64_t boundaries) const {
  return std::max<std::uint64_t>(options_.warmup_steps, boundaries > options_.window_steps
                                                            ? boundaries - options_.window_steps
                                                            : 0);
}

TrendOptions GrowthTracker::trend_options() const {
  TrendOptions t;
  t.significance_z = options_.significance_z;
  t.sustained_fraction = options_.sustained_fraction;
  t.min_points = options_.min_steps;
  return t;
}

std::optional<Trend> GrowthTracker::growing_trend(const std::vector<double>& x,
                                                  const std::vector<double>& y) const {
  if (!grows_often_and_throughout(y)) return std::nullopt;
  Trend trend = fit_trend(x, y, trend_options());
  if (!trend.growing) return std::nullopt;
  double growth = trend.slope * static_cast<double>(x.size() - 1);
  if (growth < static_cast<double>(options_.min_growth_bytes)) return std::nullopt;
  return trend;
}

std::optional<SiteTrend> GrowthTracker::series_trend(const std::vector<double>& values) const {
  std::uint64_t n = values.size();
  if (n <= options_.warmup_steps) return std::nullopt;
  std::vector<double> x, y;
  for (std::uint64_t i = window_begin(n); i < n; ++i) {
    x.push_back(static_cast<double>(i));
    y.push_back(values[i]);
  }
  std::optional<Trend> trend = growing_trend(x, y);
  if (!trend) return std::nullopt;
  SiteTrend out;
  out.bytes_per_step = trend->slope;
  out.mann_kendall_z = trend->mann_kendall_z;
  out.live_bytes = static_cast<std::uint64_t>(values.back());
  return out;
}

std::optional<SiteTrend> GrowthTracker::evaluate(std::uint32_t site_id, const Site& site) const {
  std::uint64_t n = step_numbers_.size();
  if (site.series_bytes.empty() || n <= options_.warmup_steps) return std::nullopt;
  std::uint64_t begin = window_begin(n);
  // Value at boundary i (0 before the series began).
  auto bytes_at = [&](std::uint64_t i) -> double {
    return i < site.first_index ? 0.0
                                : static_cast<double>(site.series_bytes[i - site.first_index]);
  };
  auto count_at = [&](std::uint64_t i) -> double {
    return i < site.first_index
               ? 0.0
               : static_cast<double>(site.series_allocations[i - site.first_index]);
  };
  // Cheap filter before the O(n^2) statistics.
  if (bytes_at(n - 1) < bytes_at(begin) + static_cast<double>(options_.min_growth_bytes))
    return std::nullopt;

  std::vector<double> x, y, counts;
  for (std::uint64_t i = begin; i < n; ++i) {
    x.push_back(static_cast<double>(i));
    y.push_back(bytes_at(i));
    counts.push_back(count_at(i));
  }
  std::optional<Trend> trend = growing_trend(x, y);
  if (!trend) return std::nullopt;
  SiteTrend out;
  out.site_id = site_id;
  out.kind = site.kind;
  out.bytes_per_step = trend->slope;
  out.allocations_per_step = fit_trend(x, counts, trend_options()).slope;
  out.live_bytes = site.live_bytes;
  out.live_allocations = site.live_allocations;
  out.mann_kendall_z = trend->mann_kendall_z;
  // Growth began after the last boundary at which the site held no more
  // than it ever held later (its lowest level from then on).
  double lowest_after = bytes_at(n - 1);
  std::uint64_t first = n - 1;
  for (std::uint64_t i = n; i-- > 0;) {
    double v = bytes_at(i);
    if (v < lowest_after) {
      lowest_after = v;
      first = i;
    }
  }
  out.first_growing_index = std::min(first + 1, n - 1);
  return out;
}

std::vector<SiteTrend> GrowthTracker::growing_sites() const {
  std::vector<SiteTrend> out;
  if (!past_minimum()) return out;
  for (const auto& [id, site] : sites_) {
    if (auto trend = evaluate(id, site)) out.push_back(*trend);
  }
  std::sort(out.begin(), out.end(), [](const SiteTrend& a, const SiteTrend& b) {
    return a.bytes_per_step > b.bytes_per_step;
  });
  return out;
}

}  // namespace gpuleak::analysis
