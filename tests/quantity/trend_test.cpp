#include "quantity/trend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace gpuleak::quantity {
namespace {

std::vector<double> steps(std::size_t n) {
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i);
  return x;
}

TEST(Trend, linear_growth_is_growing_with_exact_slope) {
  auto x = steps(30);
  std::vector<double> y;
  for (double v : x) y.push_back(1000 + 4096 * v);
  Trend t = fit_trend(x, y);
  EXPECT_TRUE(t.growing);
  EXPECT_DOUBLE_EQ(t.slope, 4096);
  EXPECT_DOUBLE_EQ(t.intercept, 1000);
}

TEST(Trend, flat_series_is_not_growing) {
  auto x = steps(50);
  std::vector<double> y(50, 123456.0);
  Trend t = fit_trend(x, y);
  EXPECT_FALSE(t.growing);
  EXPECT_EQ(t.slope, 0);
}

TEST(Trend, single_warmup_jump_is_not_growing) {
  auto x = steps(40);
  std::vector<double> y;
  for (double v : x) y.push_back(v < 12 ? 1e6 : 5e6);
  Trend t = fit_trend(x, y);
  EXPECT_FALSE(t.growing);
}

TEST(Trend, plateau_after_fill_is_not_sustained) {
  auto x = steps(60);
  std::vector<double> y;
  for (double v : x) y.push_back(std::min(v, 20.0) * 4096);
  Trend t = fit_trend(x, y);
  EXPECT_FALSE(t.sustained);
  EXPECT_FALSE(t.growing);
}

TEST(Trend, jitter_without_trend_is_not_growing) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0, 8e6);
  auto x = steps(500);
  std::vector<double> y;
  for (std::size_t i = 0; i < x.size(); ++i) y.push_back(1e8 + noise(rng));
  Trend t = fit_trend(x, y);
  EXPECT_FALSE(t.growing);
}

TEST(Trend, slow_leak_under_jitter_is_found) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> noise(0, 1e6);
  auto x = steps(200);
  std::vector<double> y;
  for (double v : x) y.push_back(1e8 + 50e3 * v + noise(rng));
  Trend t = fit_trend(x, y);
  EXPECT_TRUE(t.growing);
  EXPECT_NEAR(t.slope, 50e3, 5e3);
}

TEST(Trend, too_few_points_give_no_verdict) {
  auto x = steps(5);
  std::vector<double> y = {1, 2, 3, 4, 5};
  Trend t = fit_trend(x, y);
  EXPECT_FALSE(t.growing);
  EXPECT_GT(t.slope, 0);
}

TEST(Trend, long_series_is_thinned_but_keeps_slope) {
  auto x = steps(5000);
  std::vector<double> y;
  for (double v : x) y.push_back(3 * v);
  Trend t = fit_trend(x, y);
  EXPECT_EQ(t.points, 400u);
  EXPECT_TRUE(t.growing);
  EXPECT_NEAR(t.slope, 3, 1e-9);
}

TEST(Trend, min_slope_filters_tiny_growth) {
  auto x = steps(30);
  std::vector<double> y;
  for (double v : x) y.push_back(v);
  TrendOptions options;
  options.min_slope = 10;
  EXPECT_FALSE(fit_trend(x, y, options).growing);
}

}  // namespace
}  // namespace gpuleak::quantity
