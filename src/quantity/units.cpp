#include "quantity/units.h"

#include <fmt/format.h>

#include <cmath>

namespace gpuleak::quantity {

namespace {

std::string scaled(double value) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double magnitude = std::fabs(value);
  int unit = 0;
  while (magnitude >= 1024.0 && unit < 5) {
    magnitude /= 1024.0;
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", value);
  if (magnitude >= 100.0) return fmt::format("{:.0f} {}", value, kUnits[unit]);
  if (magnitude >= 10.0) return fmt::format("{:.1f} {}", value, kUnits[unit]);
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) { return scaled(static_cast<double>(bytes)); }

std::string format_signed_bytes(double bytes) {
  std::string text = scaled(bytes);
  return bytes > 0 ? "+" + text : text;
}

std::string format_duration_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "never";
  if (seconds < 0) seconds = 0;
  if (seconds < 1.0) return fmt::format("{:.0f} ms", seconds * 1000.0);
  if (seconds < 60.0) return fmt::format("{:.0f} s", seconds);
  auto total = static_cast<std::uint64_t>(std::llround(seconds));
  std::uint64_t days = total / 86400, hours = (total % 86400) / 3600;
  std::uint64_t minutes = (total % 3600) / 60, secs = total % 60;
  if (days > 0) return fmt::format("{} d {} h", days, hours);
  if (hours > 0) return fmt::format("{} h {} min", hours, minutes);
  return fmt::format("{} min {} s", minutes, secs);
}

std::string format_rate(double bytes_per_unit, const char* unit) {
  return fmt::format("{}/{}", format_signed_bytes(bytes_per_unit), unit);
}

}  // namespace gpuleak::quantity
