// Formatting of quantities for people: bytes in binary units, durations,
// rates. Every number a person reads goes through here, so units are
// consistent across text, HTML and the terminal view.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::quantity {

// 0 B, 512 B, 4.0 KiB, 38.2 MiB, 1.50 GiB.
std::string format_bytes(std::uint64_t bytes);
// Signed variant for growth: +4.0 KiB, -1.2 MiB.
std::string format_signed_bytes(double bytes);
// 850 ms, 42 s, 3 min 20 s, 2 h 10 min, 3 d 4 h.
std::string format_duration_seconds(double seconds);
// A byte rate with its unit of time: "38.0 MiB/step", "1.2 MiB/s".
std::string format_rate(double bytes_per_unit, const char* unit);
inline std::string format_rate(double bytes_per_unit, const std::string& unit) {
  return format_rate(bytes_per_unit, unit.c_str());
}

}  // namespace gpuleak::quantity
