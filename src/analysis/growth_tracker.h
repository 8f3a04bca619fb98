// Live bytes per allocation site at every step boundary, and the decision
// whether a site keeps growing.
//
// A "site" is a stack id. Between boundaries only running totals change; at
// a boundary every site that holds memory appends its totals to a series
// (sites that are empty at every boundary, like a step's activations, cost
// nothing). After the warm-up, a site is *growing* when the trend test
// (trend.h) over the last `window_steps` boundaries says so, the growth over
// the window is at least `min_growth_bytes`, and at least `min_steps`
// boundaries have passed since warm-up, and the site grew at many of them,
// spread over the window: a cache that fills for a few dozen steps and then
// stops, or a buffer re-grown only for a new longest batch, is not called a
// leak, and a real leak of one 4 KiB tensor per step is called one
// `min_steps` steps after warm-up.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "analysis/live_set.h"
#include "analysis/trend.h"

namespace gpuleak::analysis {

struct GrowthOptions {
  std::uint64_t warmup_steps = 5;
  std::uint64_t min_steps = 40;
  std::uint64_t window_steps = 200;
  std::uint64_t min_growth_bytes = 32 * 1024;
  double significance_z = 3.09;
  double sustained_fraction = 0.5;
  // A leak adds memory at many steps, spread over the window: a buffer that
  // is only re-grown for a new longest batch (record highs, ever rarer)
  // increases a handful of times. Growth needs this many increases, and at
  // least one in each quarter of the window.
  std::uint64_t min_increases = 8;
};

struct SiteTrend {
  std::uint32_t site_id = 0;
  trace::MemoryKind kind = trace::MemoryKind::kTorchBlock;
  double bytes_per_step = 0;
  double allocations_per_step = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_allocations = 0;
  std::uint64_t first_growing_index = 0;  // boundary index where growth began
  double mann_kendall_z = 0;
};

class GrowthTracker {
 public:
  explicit GrowthTracker(GrowthOptions options = {}) : options_(options) {}

  void on_alloc(const LiveAllocation& allocation);
  void on_free(const LiveAllocation& allocation);
  // A step boundary. `step_number` is the program's own count.
  void on_boundary(std::uint64_t step_number, std::uint64_t time_ns);
  // Forget all boundaries (used when real steps replace time windows).
  void reset_boundaries();

  std::uint64_t boundaries() const { return step_numbers_.size(); }
  std::uint64_t post_warmup_boundaries() const;
  bool past_minimum() const { return post_warmup_boundaries() >= options_.min_steps; }
  const std::vector<std::uint64_t>& step_numbers() const { return step_numbers_; }
  const std::vector<std::uint64_t>& boundary_times_ns() const { return boundary_times_ns_; }
  const GrowthOptions& options() const { return options_; }

  // Sites growing as of the latest boundary, fastest first.
  std::vector<SiteTrend> growing_sites() const;

  // Trend of any per-boundary series (host RSS, pool reserved) with the
  // same window and rules.
  std::optional<SiteTrend> series_trend(const std::vector<double>& values) const;

  // Every site's kind and live bytes at the latest boundary (or now, when
  // there was none): `visit(site_id, kind, bytes)`.
  template <class Visit>
  void for_each_site_at_last_boundary(Visit&& visit) const {
    for (const auto& [id, site] : sites_) {
      std::uint64_t bytes = site.live_bytes;
      if (!step_numbers_.empty()) bytes = site.series_bytes.empty() ? 0 : site.series_bytes.back();
      if (bytes > 0) visit(id, site.kind, bytes);
    }
  }

 private:
  struct Site {
    trace::MemoryKind kind = trace::MemoryKind::kTorchBlock;
    std::uint64_t live_bytes = 0;
    std::uint64_t live_allocations = 0;
    std::uint64_t first_index = 0;  // boundary index of series_bytes[0]
    std::vector<std::uint64_t> series_bytes;
    std::vector<std::uint32_t> series_allocations;
  };
  std::optional<SiteTrend> evaluate(std::uint32_t site_id, const Site& site) const;
  bool grows_often_and_throughout(const std::vector<double>& values) const;
  // First boundary index of the window that ends at `boundaries`.
  std::uint64_t window_begin(std::uint64_t boundaries) const;
  TrendOptions trend_options() const;
  // The one growth rule: frequent increases spread over the window, a
  // significant sustained trend, and enough growth in all.
  std::optional<Trend> growing_trend(const std::vector<double>& x,
                                     const std::vector<double>& y) const;

  GrowthOptions options_;
  std::unordered_map<std::uint32_t, Site> sites_;
  std::vector<std::uint64_t> step_numbers_;
  std::vector<std::uint64_t> boundary_times_ns_;
};

}  // namespace gpuleak::analysis
