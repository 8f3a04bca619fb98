#include "report/json_text.h"

namespace gpuleak::report {

std::size_t utf8_sequence_bytes(std::string_view text, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char b0 = byte(i);
  std::size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

namespace {

void append_hex_escape(std::string& out, const char* prefix, unsigned value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += prefix;
  out += kHex[(value >> 4) & 0xf];
  out += kHex[value & 0xf];
}

void append_value(std::string& out, const nlohmann::json& value, int indent, int depth) {
  auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
  };
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      append_json_string(out, value.get_ref<const std::string&>());
      return;
    case nlohmann::json::value_t::array: {
      if (value.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& element : value) {
        if (!first) out += ',';
        first = false;
        if (indent >= 0) newline(depth + 1);
        append_value(out, element, indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case nlohmann::json::value_t::object: {
      if (value.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out += ',';
        first = false;
        if (indent >= 0) newline(depth + 1);
        append_json_string(out, it.key());
        out += indent >= 0 ? ": " : ":";
        append_value(out, it.value(), indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    default:
      // Numbers, booleans, null (and binary, which reports never hold).
      out += value.dump();
      return;
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view bytes) {
  out += '"';
  for (std::size_t i = 0; i < bytes.size();) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20)
            append_hex_escape(out, "\\u00", c);
          else
            out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    std::size_t n = utf8_sequence_bytes(bytes, i);
    if (n == 0) {
      append_hex_escape(out, "\\udc", c);  // PEP 383: the byte 0xXX as U+DCXX
      ++i;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  out += '"';
}

std::string json_text(const nlohmann::json& value, int indent) {
  std::string out;
  append_value(out, value, indent, 0);
  return out;
}

}  // namespace gpuleak::report
