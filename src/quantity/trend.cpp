#include "quantity/trend.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpuleak::quantity {

namespace {

struct Points {
  std::vector<double> x, y;
};

Points thin(std::span<const double> x, std::span<const double> y, std::size_t max_points) {
  Points out;
  std::size_t n = std::min(x.size(), y.size());
  if (n <= max_points || max_points < 2) {
    out.x.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    out.y.assign(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
  }
  // Evenly spaced indices, always keeping the first and the last point.
  for (std::size_t k = 0; k < max_points; ++k) {
    std::size_t i = k * (n - 1) / (max_points - 1);
    out.x.push_back(x[i]);
    out.y.push_back(y[i]);
  }
  return out;
}

double median(std::vector<double>& values) {
  if (values.empty()) return 0.0;
  std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2.0;
}

double theil_sen_slope(const double* x, const double* y, std::size_t n) {
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      double dx = x[j] - x[i];
      if (dx > 0) slopes.push_back((y[j] - y[i]) / dx);
    }
  }
  return median(slopes);
}

double mann_kendall_z(const std::vector<double>& y) {
  std::size_t n = y.size();
  // Integer sums, so the compiler can vectorize the inner loop.
  long long s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double yi = y[i];
    long long row = 0;
    for (std::size_t j = i + 1; j < n; ++j) row += (y[j] > yi) - (y[j] < yi);
    s += row;
  }
  // Tie groups: runs of equal values once sorted.
  std::vector<double> sorted(y);
  std::sort(sorted.begin(), sorted.end());
  auto term = [](double t) { return t * (t - 1) * (2 * t + 5); };
  double variance = term(static_cast<double>(n));
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && sorted[j] == sorted[i]) ++j;
    if (j - i > 1) variance -= term(static_cast<double>(j - i));
    i = j;
  }
  variance /= 18.0;
  if (variance <= 0) return 0.0;
  auto sum = static_cast<double>(s);
  if (s > 0) return (sum - 1) / std::sqrt(variance);
  if (s < 0) return (sum + 1) / std::sqrt(variance);
  return 0.0;
}

}  // namespace

double theil_sen_slope(std::span<const double> x, std::span<const double> y,
                       std::size_t max_points) {
  Points p = thin(x, y, max_points);
  if (p.x.size() < 2) return 0.0;
  return theil_sen_slope(p.x.data(), p.y.data(), p.x.size());
}

Trend fit_trend(std::span<const double> x, std::span<const double> y, const TrendOptions& options) {
  Trend trend;
  Points p = thin(x, y, options.max_points);
  std::size_t n = p.x.size();
  trend.points = n;
  if (n < 2) return trend;

  trend.mann_kendall_z = mann_kendall_z(p.y);
  trend.significant = trend.mann_kendall_z >= options.significance_z;
  if (options.only_if_significant && !trend.significant) return trend;

  trend.slope = theil_sen_slope(p.x.data(), p.y.data(), n);
  std::vector<double> intercepts(n);
  for (std::size_t i = 0; i < n; ++i) intercepts[i] = p.y[i] - trend.slope * p.x[i];
  trend.intercept = median(intercepts);

  std::size_t half = n / 2;
  if (n - half >= 2)
    trend.recent_slope = theil_sen_slope(p.x.data() + half, p.y.data() + half, n - half);

  trend.sustained =
      trend.slope > 0 && trend.recent_slope >= options.sustained_fraction * trend.slope;
  trend.growing = n >= options.min_points && trend.significant && trend.sustained &&
                  trend.slope > 0 && trend.slope >= options.min_slope;
  return trend;
}

}  // namespace gpuleak::quantity
