// A robust test for "this series keeps growing".
//
// Used by the leak verdicts (x = training step, y = live bytes of one site)
// and by the live monitor (x = seconds, y = a process's GPU memory). It
// combines three checks, each aimed at a way naive tools are fooled:
//   * Theil–Sen slope (median of pairwise slopes): one outlier or a jittery
//     sequence length does not move it;
//   * Mann–Kendall test for a monotonic trend, with tie correction: a series
//     that only jumps once (allocator warm-up) is mostly ties and stays
//     insignificant;
//   * sustained growth: the slope over the most recent half must still be a
//     good fraction of the whole slope, so a cache that filled and then
//     plateaued is not called a leak.
//
// Pure functions, no state, thread-safe.
#pragma once

#include <cstddef>
#include <span>

namespace gpuleak::quantity {

struct TrendOptions {
  // Slopes below this (in y units per x unit) count as flat.
  double min_slope = 0.0;
  // One-sided Mann–Kendall z needed to call the trend significant
  // (3.09 is p = 0.001).
  double significance_z = 3.09;
  // The recent half's slope must be at least this fraction of the whole.
  double sustained_fraction = 0.5;
  // Fewer points than this never give a verdict.
  std::size_t min_points = 8;
  // Series longer than this are thinned evenly before the O(n^2) statistics.
  std::size_t max_points = 400;
  // Stop after the Mann–Kendall test when it is not significant (the slopes
  // then stay 0): for callers that only want growing trends.
  bool only_if_significant = false;
};

struct Trend {
  std::size_t points = 0;
  double slope = 0.0;         // Theil–Sen, y units per x unit
  double intercept = 0.0;     // y at x = 0 on the Theil–Sen line
  double recent_slope = 0.0;  // Theil–Sen over the second half of the points
  double mann_kendall_z = 0.0;
  bool significant = false;  // z >= significance_z
  bool sustained = false;    // recent_slope >= sustained_fraction * slope
  bool growing = false;      // enough points, significant, sustained, slope >= min_slope
};

// `x` must be non-decreasing and the same length as `y`.
Trend fit_trend(std::span<const double> x, std::span<const double> y,
                const TrendOptions& options = {});

// The Theil–Sen slope alone (same thinning as fit_trend).
double theil_sen_slope(std::span<const double> x, std::span<const double> y,
                       std::size_t max_points = 400);

}  // namespace gpuleak::quantity
