// LEB128 varints and zig-zag, shared by the codec. Internal to src/trace.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::trace::varint {

inline std::uint8_t* put(std::uint8_t* out, std::uint64_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<std::uint8_t>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<std::uint8_t>(value);
  return out;
}

inline void append(std::string& out, std::uint64_t value) {
  std::uint8_t buffer[10];
  std::uint8_t* end = put(buffer, value);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(end - buffer));
}

// Returns false if the varint runs past `end` or is longer than 10 bytes.
inline bool get(const std::uint8_t** cursor, const std::uint8_t* end, std::uint64_t* value) {
  std::uint64_t result = 0;
  const std::uint8_t* p = *cursor;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    std::uint8_t byte = *p++;
    if (shift == 63 && byte > 1) return false;
    result |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *cursor = p;
      *value = result;
      return true;
    }
  }
  return false;
}

inline std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
inline std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

}  // namespace gpuleak::trace::varint
