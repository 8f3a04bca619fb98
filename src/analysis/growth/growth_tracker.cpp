#include "analysis/growth/growth_tracker.h"

#include <algorithm>
#include <cmath>

namespace gpuleak::analysis {

namespace {

// Step-number runs kept before the oldest are merged (step_number_at).
constexpr std::size_t kMaxStepRuns = 4096;

// Levels a site keeps from before the window before they are thinned by age.
constexpr std::size_t kPastLevels = 128;

// Over a horizon of 2, 4, 8 ... windows since growth began, a site must have
// grown by at least this fraction of what its window's rate gives: the total
// of a full buffer whose entries vary drifts like a random walk, and a
// window of it can look like steady growth.
constexpr double kLongHorizonFraction = 0.25;

// A rise of the level counts (for stopped_growing) when it exceeds the last
// rise by min_growth_bytes, or by this fraction of the level, whichever is
// more: a full buffer of varying entries moves by a fraction of its size.
constexpr double kRiseFractionOfLevel = 1.0 / 64;

// Thins levels from before the window so that each doubling of age (in
// windows) keeps about eight of them: every other one goes in a doubling
// that holds more than eight. The oldest always stays (before it the site
// held nothing), so a level stands for its index to within an eighth of
// its age.
template <class Level>
void thin_by_age(std::vector<Level>& past, std::uint64_t now, std::uint64_t window) {
  window = std::max<std::uint64_t>(1, window);
  auto octave = [&](const Level& l) {
    std::uint64_t age = (now - l.index) / window;
    return age == 0 ? 0 : 64 - __builtin_clzll(age);
  };
  std::vector<Level> kept;
  std::size_t i = 0;
  while (i < past.size()) {
    std::size_t j = i;
    while (j < past.size() && octave(past[j]) == octave(past[i])) ++j;
    std::size_t count = j - i;
    for (std::size_t k = i; k < j; ++k) {
      bool keep = count <= 8 || (k - i) % 2 == 0 || k + 1 == j || k == 0;
      if (keep) kept.push_back(past[k]);
    }
    i = j;
  }
  past = std::move(kept);
}

}  // namespace

// ---- RecentValues -----------------------------------------------------------

void RecentValues::push(double value) {
  if (ring_.size() < capacity_)
    ring_.push_back(value);
  else
    ring_[total_ % capacity_] = value;
  ++total_;
}

void RecentValues::clear() {
  ring_.clear();
  total_ = 0;
}

std::vector<double> RecentValues::last(std::size_t n) const {
  std::size_t held = ring_.size();
  n = std::min(n, held);
  std::vector<double> out;
  out.reserve(n);
  for (std::uint64_t i = total_ - n; i < total_; ++i) {
    out.push_back(held < capacity_ ? ring_[i] : ring_[i % capacity_]);
  }
  return out;
}

// ---- GrowthTracker ----------------------------------------------------------

GrowthTracker::GrowthTracker(GrowthOptions options)
    : options_(options), boundary_times_ns_(options.window_steps + 1) {}

GrowthTracker::Site& GrowthTracker::site_of(std::uint32_t id) {
  if (id >= kDirectSiteIds) return sites_[id];
  if (id < site_by_id_.size() && site_by_id_[id] != nullptr) return *site_by_id_[id];
  Site& site = sites_[id];
  if (id >= site_by_id_.size()) {
    std::size_t size = std::max<std::size_t>(id + 1, 2 * site_by_id_.size());
    site_by_id_.resize(std::min<std::size_t>(size, kDirectSiteIds), nullptr);
  }
  site_by_id_[id] = &site;
  return site;
}

GrowthTracker::Site* GrowthTracker::existing_site(std::uint32_t id) {
  if (id < kDirectSiteIds) return id < site_by_id_.size() ? site_by_id_[id] : nullptr;
  auto it = sites_.find(id);
  return it == sites_.end() ? nullptr : &it->second;
}

void GrowthTracker::on_alloc(const LiveAllocation& a) {
  Site& site = site_of(a.stack_id);
  site.id = a.stack_id;
  site.kind = a.kind;
  site.live_bytes += a.size;
  site.live_allocations += 1;
  if (!site.dirty) {
    site.dirty = true;
    dirty_.push_back(&site);  // unordered_map nodes never move
  }
}

void GrowthTracker::on_free(const LiveAllocation& a) {
  Site* found = existing_site(a.stack_id);
  if (found == nullptr) return;
  Site& site = *found;
  site.live_bytes -= std::min(site.live_bytes, a.size);
  if (site.live_allocations > 0) site.live_allocations -= 1;
  if (!site.dirty) {
    site.dirty = true;
    dirty_.push_back(&site);
  }
}

void GrowthTracker::on_lost(std::uint64_t events) {
  lossy_since_boundary_ = true;
  lost_events_ += events;
}

void GrowthTracker::record_level(Site& site, std::uint64_t index, bool lossy) {
  double actual_bytes = static_cast<double>(site.live_bytes);
  double actual_allocations = static_cast<double>(site.live_allocations);
  if (lossy) {
    // What this step changed may be an artefact of lost events: the level
    // stays where it was, the difference is carried from now on.
    site.loss_offset_bytes += actual_bytes - static_cast<double>(site.last_actual_bytes);
    site.loss_offset_allocations +=
        actual_allocations - static_cast<double>(site.last_actual_allocations);
  }
  site.last_actual_bytes = site.live_bytes;
  site.last_actual_allocations = site.live_allocations;
  double bytes = actual_bytes - site.loss_offset_bytes;
  double allocations = actual_allocations - site.loss_offset_allocations;
  bool first = site.levels.empty();
  if (!first && site.levels.back().bytes == bytes && site.levels.back().allocations == allocations)
    return;  // the same level as before

  auto tolerance = static_cast<double>(options_.min_growth_bytes);
  if (first) {
    // Before its first level the site held nothing.
    if (index > 0) {
      site.lowest_bytes = 0;
      site.lowest_index = index - 1;
      site.rise_level_bytes = 0;
    } else {
      site.lowest_bytes = bytes;
      site.lowest_index = 0;
      site.rise_level_bytes = bytes;
    }
    site.last_rise_index = index;
    site.growth_start_index = index;
  } else if (site.levels.back().bytes <= site.lowest_bytes) {
    // The previous level held until the boundary before this one.
    site.lowest_bytes = site.levels.back().bytes;
    site.lowest_index = index - 1;
  }
  if (bytes <= site.lowest_bytes) {
    site.lowest_bytes = bytes;
    site.lowest_index = index;
  }
  tolerance = std::max(tolerance, site.rise_level_bytes * kRiseFractionOfLevel);
  if (bytes > site.rise_level_bytes + tolerance) {
    site.rise_level_bytes = bytes;
    site.last_rise_index = index;
    site.growth_start_index = site.lowest_index + 1;
  }
  site.levels.push_back(Level{index, bytes, allocations});
  site.changed_since_judged = true;
  if (!site.active) {
    site.active = true;
    active_.push_back(site.id);
  }
}

void GrowthTracker::on_boundary(std::uint64_t step_number, std::uint64_t time_ns) {
  std::uint64_t index = boundaries_++;
  if (step_runs_.empty() || step_number != last_step_ + 1) {
    if (step_runs_.size() >= kMaxStepRuns) {
      // Merge the older half pairwise: early boundaries' numbers become
      // approximate, recent ones stay exact.
      std::vector<StepRun> kept;
      std::size_t half = step_runs_.size() / 2;
      for (std::size_t i = 0; i < step_runs_.size(); ++i) {
        if (i >= half || i % 2 == 0) kept.push_back(step_runs_[i]);
      }
      step_runs_ = std::move(kept);
    }
    step_runs_.push_back(StepRun{index, step_number});
  }
  last_step_ = step_number;
  boundary_times_ns_.push(static_cast<double>(time_ns));

  bool lossy = lossy_since_boundary_;
  lossy_since_boundary_ = false;
  if (lossy) lossy_indices_.push_back(index);
  std::uint64_t begin = window_begin(boundaries_);
  auto stale = std::find_if(lossy_indices_.begin(), lossy_indices_.end(),
                            [&](std::uint64_t i) { return i >= begin; });
  lossy_indices_.erase(lossy_indices_.begin(), stale);

  for (Site* site : dirty_) {
    site->dirty = false;
    if (site->levels.empty() && site->live_bytes == 0) continue;  // transient within steps
    record_level(*site, index, lossy);
  }
  dirty_.clear();
}

void GrowthTracker::reset_boundaries() {
  boundaries_ = 0;
  step_runs_.clear();
  last_step_ = 0;
  boundary_times_ns_.clear();
  lossy_since_boundary_ = false;
  lossy_indices_.clear();
  active_.clear();
  for (auto& [id, site] : sites_) {
    Site fresh;
    fresh.id = site.id;
    fresh.kind = site.kind;
    fresh.live_bytes = site.live_bytes;
    fresh.live_allocations = site.live_allocations;
    fresh.dirty = site.dirty;
    site = std::move(fresh);
  }
}

std::uint64_t GrowthTracker::post_warmup_boundaries() const {
  return boundaries_ > options_.warmup_steps ? boundaries_ - options_.warmup_steps : 0;
}

std::uint64_t GrowthTracker::step_number_at(std::uint64_t index) const {
  if (step_runs_.empty()) return 0;
  auto it =
      std::upper_bound(step_runs_.begin(), step_runs_.end(), index,
                       [](std::uint64_t i, const StepRun& run) { return i < run.first_index; });
  if (it == step_runs_.begin()) return step_runs_.front().first_step;
  --it;
  return it->first_step + (index - it->first_index);
}

double GrowthTracker::seconds_per_step() const {
  std::uint64_t begin = std::max<std::uint64_t>(window_begin(boundaries_), 1);
  std::vector<double> times = boundary_times_ns_.last(options_.window_steps + 1);
  std::uint64_t first_index = boundaries_ - times.size();
  std::vector<double> durations;
  for (std::size_t k = 1; k < times.size(); ++k) {
    if (first_index + k < begin) continue;
    if (times[k] > times[k - 1]) durations.push_back((times[k] - times[k - 1]) / 1e9);
  }
  if (durations.empty()) return 0;
  std::nth_element(durations.begin(),
                   durations.begin() + static_cast<std::ptrdiff_t>(durations.size() / 2),
                   durations.end());
  return durations[durations.size() / 2];
}

std::uint64_t GrowthTracker::lossy_boundaries_in_window() const {
  std::uint64_t begin = window_begin(boundaries_);
  return static_cast<std::uint64_t>(
      std::count_if(lossy_indices_.begin(), lossy_indices_.end(),
                    [&](std::uint64_t i) { return i >= begin && i < boundaries_; }));
}

bool GrowthTracker::grows_often_and_throughout(std::span<const double> values) const {
  std::size_t n = values.size();
  if (n < 4) return false;
  std::vector<std::size_t> increases;
  bool quarter_grew[4] = {false, false, false, false};
  for (std::size_t i = 1; i < n; ++i) {
    if (values[i] > values[i - 1]) {
      increases.push_back(i);
      quarter_grew[std::min<std::size_t>(3, 4 * i / n)] = true;
    }
  }
  if (!(quarter_grew[0] && quarter_grew[1] && quarter_grew[2] && quarter_grew[3])) return false;
  if (increases.size() >= options_.min_increases) return true;
  if (increases.size() < std::max<std::uint64_t>(2, options_.min_regular_increases)) return false;
  return increases_are_regular(increases, n);
}

bool GrowthTracker::increases_are_regular(std::span<const std::size_t> increases,
                                          std::size_t values) const {
  std::size_t shortest = values, longest = 0;
  for (std::size_t k = 1; k < increases.size(); ++k) {
    std::size_t gap = increases[k] - increases[k - 1];
    shortest = std::min(shortest, gap);
    longest = std::max(longest, gap);
  }
  // The time since the last increase counts as a gap that is still open: a
  // staircase that stopped is not regular any more once it waited too long.
  longest = std::max(longest, values - 1 - increases.back());
  return static_cast<double>(longest) <= options_.max_gap_spread * static_cast<double>(shortest);
}

bool GrowthTracker::rises_most_of_the_way(std::span<const double> values) const {
  if (values.size() < 2) return false;
  double movement = 0;
  for (std::size_t i = 1; i < values.size(); ++i) movement += std::abs(values[i] - values[i - 1]);
  double rise = values.back() - values.front();
  return movement > 0 && rise >= options_.min_rise_of_movement * movement;
}

std::uint64_t GrowthTracker::window_begin(std::uint64_t boundaries) const {
  return std::max<std::uint64_t>(options_.warmup_steps, boundaries > options_.window_steps
                                                            ? boundaries - options_.window_steps
                                                            : 0);
}

TrendOptions GrowthTracker::trend_options(std::uint64_t min_points) const {
  TrendOptions t;
  t.significance_z = options_.significance_z;
  t.sustained_fraction = options_.sustained_fraction;
  t.min_points = min_points;
  t.only_if_significant = true;
  return t;
}

std::optional<Trend> GrowthTracker::growing_trend(std::span<const double> x,
                                                  std::span<const double> y,
                                                  std::uint64_t min_points) const {
  if (!grows_often_and_throughout(y)) return std::nullopt;
  Trend trend = fit_trend(x, y, trend_options(min_points));
  if (!trend.growing) return std::nullopt;
  double growth = trend.slope * static_cast<double>(x.size() - 1);
  if (growth < static_cast<double>(options_.min_growth_bytes)) return std::nullopt;
  return trend;
}

std::optional<SiteTrend> GrowthTracker::recent_series_trend(std::span<const double> recent,
                                                            std::uint64_t total) const {
  if (total <= options_.warmup_steps) return std::nullopt;
  std::uint64_t begin = window_begin(total);
  std::uint64_t wanted = total - begin;
  if (recent.size() < wanted) return std::nullopt;
  std::span<const double> y = recent.subspan(recent.size() - wanted);
  std::vector<double> x(wanted);
  for (std::uint64_t i = 0; i < wanted; ++i) x[i] = static_cast<double>(begin + i);
  std::optional<Trend> trend = growing_trend(x, y, options_.min_steps);
  if (!trend) return std::nullopt;
  SiteTrend out;
  out.bytes_per_step = trend->slope;
  out.mann_kendall_z = trend->mann_kendall_z;
  out.live_bytes = static_cast<std::uint64_t>(recent.back());
  return out;
}

std::optional<SiteTrend> GrowthTracker::series_trend(const std::vector<double>& values) const {
  return recent_series_trend(values, values.size());
}

std::optional<SiteTrend> GrowthTracker::series_trend(const RecentValues& values) const {
  std::vector<double> recent = values.last(options_.window_steps);
  return recent_series_trend(recent, values.total());
}

void GrowthTracker::forget_old_levels(Site& site) const {
  std::uint64_t begin = window_begin(boundaries_);
  while (site.head + 1 < site.levels.size() && site.levels[site.head + 1].index <= begin) {
    if (site.past.size() >= kPastLevels) thin_by_age(site.past, boundaries_, options_.window_steps);
    site.past.push_back(site.levels[site.head]);
    ++site.head;
  }
  if (site.head > 16 && site.head * 2 > site.levels.size()) {
    site.levels.erase(site.levels.begin(),
                      site.levels.begin() + static_cast<std::ptrdiff_t>(site.head));
    site.head = 0;
  }
}

double GrowthTracker::level_at(const Site& site, std::uint64_t index) const {
  // The last level at or before `index`; 0 before the first.
  auto first = site.levels.begin() + static_cast<std::ptrdiff_t>(site.head);
  auto it = std::upper_bound(first, site.levels.end(), index,
                             [](std::uint64_t i, const Level& l) { return i < l.index; });
  if (it == first) return first != site.levels.end() && first->index <= index ? first->bytes : 0;
  return std::prev(it)->bytes;
}

double GrowthTracker::past_level_at(const Site& site, std::uint64_t index) const {
  auto it = std::upper_bound(site.past.begin(), site.past.end(), index,
                             [](std::uint64_t i, const Level& l) { return i < l.index; });
  if (it != site.past.begin()) return std::prev(it)->bytes;
  return 0;  // before anything the site kept: it held nothing, or its oldest is lost
}

bool GrowthTracker::holds_over_longer_horizons(const Site& site, double bytes_per_step,
                                               std::uint64_t first_growing_index) const {
  std::uint64_t last = boundaries_ - 1;
  double now = site.levels.back().bytes;
  std::uint64_t window = std::max<std::uint64_t>(1, options_.window_steps);
  for (std::uint64_t horizon = 2 * window; horizon <= last - std::min(last, first_growing_index);
       horizon *= 2) {
    std::uint64_t then_index = last - horizon;
    double then = then_index >= site.levels[site.head].index ? level_at(site, then_index)
                                                             : past_level_at(site, then_index);
    if (now - then < kLongHorizonFraction * bytes_per_step * static_cast<double>(horizon))
      return false;
  }
  return true;
}

void GrowthTracker::window_values(const Site& site, std::uint64_t begin, std::vector<double>& bytes,
                                  std::vector<double>* allocations) const {
  std::uint64_t n = boundaries_;
  bytes.assign(n - begin, 0.0);
  if (allocations) allocations->assign(n - begin, 0.0);
  std::size_t k = site.head;
  double b = 0, a = 0;
  for (std::uint64_t i = begin; i < n; ++i) {
    while (k < site.levels.size() && site.levels[k].index <= i) {
      b = site.levels[k].bytes;
      a = site.levels[k].allocations;
      ++k;
    }
    bytes[i - begin] = b;
    if (allocations) (*allocations)[i - begin] = a;
  }
}

std::optional<SiteTrend> GrowthTracker::evaluate(std::uint32_t site_id, const Site& site,
                                                 std::uint64_t min_points) const {
  std::uint64_t n = boundaries_;
  if (site.levels.empty() || n <= options_.warmup_steps) return std::nullopt;
  std::uint64_t begin = window_begin(n);
  std::vector<double> x, y, counts;
  window_values(site, begin, y, &counts);
  x.resize(y.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(begin + i);
  if (!lossy_indices_.empty()) {
    // Steps that lost events changed nothing (record_level): judge the
    // others, one x unit each, so the rate is per complete step.
    std::size_t kept = 0, next_lossy = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      std::uint64_t index = begin + i;
      while (next_lossy < lossy_indices_.size() && lossy_indices_[next_lossy] < index) ++next_lossy;
      if (next_lossy < lossy_indices_.size() && lossy_indices_[next_lossy] == index) continue;
      x[kept] = static_cast<double>(begin + kept);
      y[kept] = y[i];
      counts[kept] = counts[i];
      ++kept;
    }
    x.resize(kept);
    y.resize(kept);
    counts.resize(kept);
  }
  std::optional<Trend> trend = growing_trend(x, y, min_points);
  if (!trend) return std::nullopt;
  SiteTrend out;
  out.site_id = site_id;
  out.kind = site.kind;
  out.bytes_per_step = trend->slope;
  out.allocations_per_step = theil_sen_slope(x, counts);
  if (std::abs(out.allocations_per_step) * static_cast<double>(x.size() - 1) < 1.0 &&
      !rises_most_of_the_way(y)) {
    return std::nullopt;  // as many allocations as before, sizes wandering
  }
  out.live_bytes = site.live_bytes;
  out.live_allocations = site.live_allocations;
  out.mann_kendall_z = trend->mann_kendall_z;
  // Growth began after the last boundary at which the site was at its
  // lowest (including the boundary now, when it is there still).
  std::uint64_t lowest = site.lowest_index;
  if (site.levels.back().bytes <= site.lowest_bytes) lowest = n - 1;
  out.first_growing_index = std::min(lowest + 1, n - 1);
  if (!holds_over_longer_horizons(site, out.bytes_per_step, out.first_growing_index))
    return std::nullopt;
  out.first_growing_step = step_number_at(out.first_growing_index);
  return out;
}

std::vector<SiteTrend> GrowthTracker::growing_sites() const {
  std::vector<SiteTrend> out;
  if (!past_minimum()) return out;
  std::uint64_t n = boundaries_;
  std::uint64_t begin = window_begin(n);
  std::uint64_t regrowing_interval = std::max<std::uint64_t>(1, options_.window_steps / 4);
  std::uint64_t longest_pause = std::max<std::uint64_t>(1, options_.window_steps / 8);
  std::size_t kept = 0;
  for (std::size_t k = 0; k < active_.size(); ++k) {
    std::uint32_t id = active_[k];
    auto found = sites_.find(id);
    if (found == sites_.end()) continue;
    Site& site = found->second;
    forget_old_levels(site);
    // One level for the whole window: the site is flat there and cannot grow.
    bool flat = site.levels.size() - site.head <= 1 && site.levels[site.head].index <= begin;
    if (flat) {
      site.active = false;
      site.judged_growing = false;
      site.trend.reset();
      continue;
    }
    active_[kept++] = id;
    bool due = site.judged_at == 0;
    if (!due && site.judged_growing) due = n - site.judged_at >= regrowing_interval;
    if (!due && !site.judged_growing)
      due = site.changed_since_judged && n - site.judged_at >= site.pause;
    if (due) {
      bool cheap_no = false;
      // Fewer changes in the window than the increases growth needs, or
      // not enough growth from its start to now: no statistics needed.
      // Levels that start inside the window (the first one too, when the
      // site began there: it rose from nothing).
      std::size_t changes =
          site.levels.size() - site.head - (site.levels[site.head].index <= begin ? 1 : 0);
      if (changes < std::min(options_.min_increases, options_.min_regular_increases) ||
          site.levels.back().bytes <
              level_at(site, begin) + static_cast<double>(options_.min_growth_bytes)) {
        cheap_no = true;
        site.trend.reset();
      } else {
        site.trend = evaluate(id, site, options_.min_steps);
      }
      site.judged_at = n;
      site.changed_since_judged = false;
      site.judged_growing = site.trend.has_value();
      if (site.judged_growing) {
        site.ever_grew = true;
        site.pause = 0;
      } else if (!cheap_no) {
        site.pause = std::min(longest_pause, std::max<std::uint64_t>(1, site.pause * 2));
      }
    }
    if (site.judged_growing && site.trend) {
      SiteTrend t = *site.trend;
      t.live_bytes = site.live_bytes;
      t.live_allocations = site.live_allocations;
      out.push_back(t);
    }
  }
  active_.resize(kept);
  std::sort(out.begin(), out.end(), [](const SiteTrend& a, const SiteTrend& b) {
    return a.bytes_per_step != b.bytes_per_step ? a.bytes_per_step > b.bytes_per_step
                                                : a.site_id < b.site_id;
  });
  return out;
}

std::vector<SiteTrend> GrowthTracker::rising_sites() const {
  std::vector<SiteTrend> out;
  if (past_minimum() || post_warmup_boundaries() < options_.rising_min_steps) return out;
  std::uint64_t begin = window_begin(boundaries_);
  for (std::uint32_t id : active_) {
    auto found = sites_.find(id);
    if (found == sites_.end()) continue;
    const Site& site = found->second;
    // Before the minimum no level has left the window (forget_old_levels).
    if (site.levels.size() - site.head <= 1 ||
        site.levels.back().bytes <
            level_at(site, begin) + static_cast<double>(options_.min_growth_bytes))
      continue;
    if (auto trend = evaluate(id, site, options_.rising_min_steps)) {
      // At the last boundary: what the site held when the steps stopped,
      // not after the program's clean-up at exit.
      trend->live_bytes = site.last_actual_bytes;
      trend->live_allocations = site.last_actual_allocations;
      out.push_back(*trend);
    }
  }
  std::sort(out.begin(), out.end(), [](const SiteTrend& a, const SiteTrend& b) {
    return a.bytes_per_step != b.bytes_per_step ? a.bytes_per_step > b.bytes_per_step
                                                : a.site_id < b.site_id;
  });
  return out;
}

std::optional<GrowthStop> GrowthTracker::stopped_growing(std::uint32_t site_id) const {
  auto found = sites_.find(site_id);
  if (found == sites_.end() || boundaries_ == 0) return std::nullopt;
  const Site& site = found->second;
  if (site.levels.empty() || site.judged_growing) return std::nullopt;
  std::uint64_t last = boundaries_ - 1;
  if (site.last_rise_index > last) return std::nullopt;
  std::uint64_t flat = last - site.last_rise_index;
  std::uint64_t grew = site.last_rise_index > site.growth_start_index
                           ? site.last_rise_index - site.growth_start_index
                           : 0;
  if (flat < std::max(options_.stop_flat_steps, grew)) return std::nullopt;
  GrowthStop stop;
  stop.first_growing_step = step_number_at(site.growth_start_index);
  stop.grew_until_step = step_number_at(site.last_rise_index);
  stop.flat_steps = flat;
  stop.bytes = site.last_actual_bytes;
  return stop;
}

bool GrowthTracker::wanders_now(std::uint32_t site_id) const {
  auto found = sites_.find(site_id);
  if (found == sites_.end() || boundaries_ == 0) return false;
  const Site& site = found->second;
  if (site.levels.empty() || site.judged_growing) return false;
  std::uint64_t begin = window_begin(boundaries_);
  if (boundaries_ - begin < options_.min_steps) return false;
  std::vector<double> bytes, counts;
  window_values(site, begin, bytes, &counts);
  auto [low, high] = std::minmax_element(counts.begin(), counts.end());
  return *high - *low < 1.0 && !rises_most_of_the_way(bytes);
}

}  // namespace gpuleak::analysis
