// Live bytes per allocation site at every step boundary, and the decision
// whether a site keeps growing.
//
// A "site" is a stack id. Between boundaries only running totals change; at
// a boundary every site whose totals changed since the last one records its
// new level (sites that are empty at every boundary, like a step's
// activations, cost nothing, and a site that holds the same memory for a
// million steps holds one level). After the warm-up, a site is *growing*
// when the trend test (quantity/trend.h) over the last `window_steps` boundaries says
// so, the growth over the window is at least `min_growth_bytes`, and at
// least `min_steps` boundaries have passed since warm-up, and the site grew
// at many of them, spread over the window: a cache that fills for a few
// dozen steps and then stops, or a buffer re-grown only for a new longest
// batch, is not called a leak, and a real leak of one 4 KiB tensor per step
// is called one `min_steps` steps after warm-up.
//
// Memory and time are bounded by the window, not by the run: a site keeps
// the levels of the last `window_steps` boundaries at most, the step
// numbers are kept as runs of consecutive numbers, the first growing step
// is found as levels arrive (the boundary after the site was last at its
// lowest), and a site is judged again only when its levels changed, at
// most every `window_steps / 4` boundaries once it was found growing and
// with a growing pause after each time it was judged not growing (see
// growing_sites()). A run of a million steps costs what a run of a
// thousand does, per step.
//
// A site found growing that then rose by no more than `min_growth_bytes`
// for `stop_flat_steps` boundaries, and for at least as many boundaries as
// it had grown, has *stopped* (stopped_growing()): "grew until step 200,
// flat since" is bounded, not a leak.
//
// A site whose allocation count is flat over the window must also have
// risen most of the way it moved (`min_rise_of_movement`): a cache of a
// fixed number of entries whose sizes vary is not a leak.
//
// Lost events: the collector drops events when it cannot keep up, and a
// dropped free leaves an allocation live that is not, a dropped allocation
// hides one that is. on_lost() marks the current step as lossy; the change
// of every site over a lossy step is left out of its trend (its level moves
// by what the step changed, so later steps are judged as if that step had
// changed nothing). The report says how many steps of the window lost
// events (lossy_boundaries_in_window()).
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "analysis/model/live_set.h"
#include "quantity/trend.h"

namespace gpuleak::analysis {

// The trend test is the quantity library's (src/quantity/trend.h), shared
// with the monitor; the analysis uses it under its own names.
using quantity::fit_trend;
using quantity::theil_sen_slope;
using quantity::Trend;
using quantity::TrendOptions;

struct GrowthOptions {
  std::uint64_t warmup_steps = 5;
  std::uint64_t min_steps = 40;
  std::uint64_t window_steps = 200;
  std::uint64_t min_growth_bytes = 32 * 1024ull;
  double significance_z = 3.09;
  double sustained_fraction = 0.5;
  // A leak adds memory at many steps, spread over the window: a buffer that
  // is only re-grown for a new longest batch (record highs, ever rarer)
  // increases a handful of times. Growth needs this many increases, and at
  // least one in each quarter of the window.
  std::uint64_t min_increases = 8;
  // Fewer increases are enough when they come at a steady interval (a
  // validation every 10 steps that keeps its outputs grows in a staircase):
  // record highs come ever rarer, a periodic leak does not. This many
  // increases, no gap between them (or since the last one) more than
  // `max_gap_spread` times the shortest gap, and still one in each quarter.
  std::uint64_t min_regular_increases = 4;
  double max_gap_spread = 1.5;
  // A site found growing has stopped after this many boundaries (and at
  // least as many as it grew) without rising by more than min_growth_bytes.
  std::uint64_t stop_flat_steps = 200;
  // A site whose number of live allocations stays flat over the window while
  // its bytes go up and down (a bounded cache of entries of varying sizes, a
  // buffer re-made for each batch's shape) is growing only if its net rise
  // is at least this fraction of all its movement (the sum of its changes'
  // sizes): a buffer replaced by ever bigger ones rises nearly all the way,
  // a full LRU cache wanders.
  double min_rise_of_movement = 0.6;
  // Before the minimum: a site that passes every other test over at least
  // this many boundaries after warm-up is *rising* (rising_sites()). Not a
  // verdict, since a cache that fills for a few dozen steps looks the same,
  // but it is what a job that runs out of memory in its first steps needs
  // to be told.
  std::uint64_t rising_min_steps = 10;
};

struct SiteTrend {
  std::uint32_t site_id = 0;
  trace::MemoryKind kind = trace::MemoryKind::kTorchBlock;
  double bytes_per_step = 0;
  double allocations_per_step = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_allocations = 0;
  std::uint64_t first_growing_index = 0;  // boundary index where growth began
  std::uint64_t first_growing_step = 0;   // the program's step number there
  double mann_kendall_z = 0;
};

// A site that grew and has since stayed flat (GrowthTracker::stopped_growing).
struct GrowthStop {
  std::uint64_t first_growing_step = 0;  // the program's step number where growth began
  std::uint64_t grew_until_step = 0;     // the step of its last rise
  std::uint64_t flat_steps = 0;          // boundaries since that rise
  std::uint64_t bytes = 0;               // what it has held since (its level then)
};

// The latest values of one per-boundary series (host RSS, pool reserved):
// as many as a growth window reads, and how many there were in all.
class RecentValues {
 public:
  explicit RecentValues(std::size_t capacity) : capacity_(capacity ? capacity : 1) {}
  void push(double value);
  void clear();
  std::uint64_t total() const { return total_; }
  // The last min(n, held) values, oldest first.
  std::vector<double> last(std::size_t n) const;

 private:
  std::size_t capacity_;
  std::vector<double> ring_;
  std::uint64_t total_ = 0;
};

class GrowthTracker {
 public:
  explicit GrowthTracker(GrowthOptions options = {});
  // dirty_ and site_by_id_ point into sites_: a copy would point into the
  // original's.
  GrowthTracker(const GrowthTracker&) = delete;
  GrowthTracker& operator=(const GrowthTracker&) = delete;

  void on_alloc(const LiveAllocation& allocation);
  void on_free(const LiveAllocation& allocation);
  // Events were lost since the last boundary: `events` more are missing
  // from the trace (a gap in its sequence numbers), or 0 when only the
  // collector's own count says so (its LostRecord; the gap counted them).
  void on_lost(std::uint64_t events);
  // A step boundary. `step_number` is the program's own count.
  void on_boundary(std::uint64_t step_number, std::uint64_t time_ns);
  // Forget all boundaries (used when real steps replace time windows).
  void reset_boundaries();

  std::uint64_t boundaries() const { return boundaries_; }
  std::uint64_t post_warmup_boundaries() const;
  bool past_minimum() const { return post_warmup_boundaries() >= options_.min_steps; }
  const GrowthOptions& options() const { return options_; }

  // The program's step number at boundary `index` (< boundaries()); exact
  // while the program's numbering jumped fewer than 4,096 times, else the
  // oldest jumps are merged (approximate for early boundaries only).
  std::uint64_t step_number_at(std::uint64_t index) const;
  // Median seconds between the boundaries of the current window (after
  // warm-up); 0 when unknown.
  double seconds_per_step() const;
  // Events missing from the trace, in all, and the boundaries of the
  // current window that lost some.
  std::uint64_t lost_events() const { return lost_events_; }
  std::uint64_t lossy_boundaries_in_window() const;

  // Sites growing as of the latest boundary, fastest first. A site judged
  // growing keeps its trend for up to window_steps / 4 boundaries before it
  // is judged again; one judged not growing is not judged again until its
  // level changes and a pause has passed (1 boundary after the first time,
  // doubling to window_steps / 8).
  std::vector<SiteTrend> growing_sites() const;
  // Before the minimum (past_minimum() false) and after rising_min_steps:
  // the sites that pass every test of growing_sites() but the number of
  // steps, fastest first. Empty otherwise. Judges every changed site each
  // time it is called (for the report at the end, not for every boundary).
  std::vector<SiteTrend> rising_sites() const;

  // For a site that grew: whether it has stopped, and since when.
  std::optional<GrowthStop> stopped_growing(std::uint32_t site_id) const;
  // For a site that grew: whether it is no longer judged growing, and over
  // the current window held as many allocations throughout while its bytes
  // went up and down more than they rose (min_rise_of_movement): a bounded
  // cache of entries of varying sizes, full now.
  bool wanders_now(std::uint32_t site_id) const;

  // Trend of any per-boundary series (host RSS, pool reserved) with the
  // same window and rules.
  std::optional<SiteTrend> series_trend(const std::vector<double>& values) const;
  std::optional<SiteTrend> series_trend(const RecentValues& values) const;

  // Every site's kind and live bytes at the latest boundary (or now, when
  // there was none): `visit(site_id, kind, bytes)`.
  template <class Visit>
  void for_each_site_at_last_boundary(Visit&& visit) const {
    for (const auto& [id, site] : sites_) {
      std::uint64_t bytes = site.live_bytes;
      if (boundaries_ > 0) bytes = site.levels.empty() ? 0 : site.last_actual_bytes;
      if (bytes > 0) visit(id, site.kind, bytes);
    }
  }

 private:
  // A site's level from boundary `index` until the next level.
  struct Level {
    std::uint64_t index;
    double bytes;  // less what lossy boundaries changed (see on_lost)
    double allocations;
  };
  struct Site {
    std::uint32_t id = 0;
    trace::MemoryKind kind = trace::MemoryKind::kTorchBlock;
    std::uint64_t live_bytes = 0;
    std::uint64_t live_allocations = 0;
    bool dirty = false;  // changed since the last boundary
    // Levels of the current window, oldest first from `head`, and the one
    // in force at the window's first boundary.
    std::vector<Level> levels;
    std::size_t head = 0;
    // Levels older than the window, thinned: the older, the sparser (at
    // most kPastLevels), for the long-horizon check.
    std::vector<Level> past;
    // What the site held at its last recorded level, and how far lossy
    // boundaries moved it.
    std::uint64_t last_actual_bytes = 0;
    std::uint64_t last_actual_allocations = 0;
    double loss_offset_bytes = 0;
    double loss_offset_allocations = 0;
    // The first growing step: the boundary after the last one at which the
    // site was at its lowest.
    double lowest_bytes = 0;
    std::uint64_t lowest_index = 0;
    // Rises: the level of the last rise by more than min_growth_bytes.
    double rise_level_bytes = 0;
    std::uint64_t last_rise_index = 0;
    std::uint64_t growth_start_index = 0;  // where the growth that ended there began
    bool active = false;                   // listed in active_
    // Judging (growing_sites).
    std::uint64_t judged_at = 0;  // boundaries() when last judged, 0 never
    bool judged_growing = false;
    bool changed_since_judged = true;
    std::uint64_t pause = 0;  // boundaries to wait after a "not growing"
    std::optional<SiteTrend> trend;
    bool ever_grew = false;
  };

  void record_level(Site& site, std::uint64_t index, bool lossy);
  void forget_old_levels(Site& site) const;
  // `min_points`: the fewest boundaries the trend is fitted over
  // (min_steps, or rising_min_steps for rising_sites()).
  std::optional<SiteTrend> evaluate(std::uint32_t site_id, const Site& site,
                                    std::uint64_t min_points) const;
  // The window's values of a site, one per boundary from `begin`.
  void window_values(const Site& site, std::uint64_t begin, std::vector<double>& bytes,
                     std::vector<double>* allocations) const;
  double level_at(const Site& site, std::uint64_t index) const;
  // The level at an index before the window (from the thinned past).
  double past_level_at(const Site& site, std::uint64_t index) const;
  // A trend found over the window must hold over longer horizons too.
  bool holds_over_longer_horizons(const Site& site, double bytes_per_step,
                                  std::uint64_t first_growing_index) const;
  bool grows_often_and_throughout(std::span<const double> values) const;
  // Indices of the increases (into a window of `values` values) at a steady
  // interval: see GrowthOptions::min_regular_increases.
  bool increases_are_regular(std::span<const std::size_t> increases, std::size_t values) const;
  // Net rise at least min_rise_of_movement of the sum of the changes' sizes.
  bool rises_most_of_the_way(std::span<const double> values) const;
  // First boundary index of the window that ends at `boundaries`.
  std::uint64_t window_begin(std::uint64_t boundaries) const;
  TrendOptions trend_options(std::uint64_t min_points) const;
  // The one growth rule: frequent increases spread over the window, a
  // significant sustained trend, and enough growth in all.
  std::optional<Trend> growing_trend(std::span<const double> x, std::span<const double> y,
                                     std::uint64_t min_points) const;
  std::optional<SiteTrend> recent_series_trend(std::span<const double> recent,
                                               std::uint64_t total) const;

  GrowthOptions options_;
  mutable std::unordered_map<std::uint32_t, Site> sites_;  // never erased from: nodes stay put
  // sites_' entries by id for ids below kDirectSiteIds (stack ids are small
  // and dense): every allocation and free finds its site without hashing.
  static constexpr std::uint32_t kDirectSiteIds = 1u << 16;
  std::vector<Site*> site_by_id_;
  Site& site_of(std::uint32_t id);        // made when new
  Site* existing_site(std::uint32_t id);  // null when none
  std::vector<Site*> dirty_;
  // Sites with a level inside the window: the only ones that can grow.
  mutable std::vector<std::uint32_t> active_;
  std::uint64_t boundaries_ = 0;
  // Step numbers as runs: boundary `first_index` had `first_step`, and each
  // next boundary one more, up to the next run.
  struct StepRun {
    std::uint64_t first_index, first_step;
  };
  std::vector<StepRun> step_runs_;
  std::uint64_t last_step_ = 0;
  RecentValues boundary_times_ns_;
  // Events lost since the last boundary, and which recent boundaries were lossy.
  bool lossy_since_boundary_ = false;
  std::uint64_t lost_events_ = 0;
  std::vector<std::uint64_t> lossy_indices_;  // ascending, within the window
};

}  // namespace gpuleak::analysis
