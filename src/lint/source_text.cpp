#include "source_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gpuleak::lint {
namespace {

// Returns the offset of the first byte that is not part of valid UTF-8, or
// npos. Overlong forms, surrogates and code points above U+10FFFF are invalid.
std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t min;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// PEP 263: "coding[:=]name" in a comment on line 1 or 2.
std::string declared_encoding(std::string_view bytes) {
  std::size_t line_start = 0;
  for (int line = 0; line < 2 && line_start < bytes.size(); ++line) {
    std::size_t end = bytes.find('\n', line_start);
    std::string_view l = bytes.substr(
        line_start, end == std::string_view::npos ? std::string_view::npos : end - line_start);
    std::size_t hash = l.find('#');
    std::size_t first = l.find_first_not_of(" \t\f");
    if (hash != std::string_view::npos && first == hash) {
      std::size_t at = l.find("coding", hash);
      if (at != std::string_view::npos && at + 6 < l.size() &&
          (l[at + 6] == ':' || l[at + 6] == '=')) {
        std::size_t k = at + 7;
        while (k < l.size() && (l[k] == ' ' || l[k] == '\t')) ++k;
        std::string name;
        while (k < l.size() && (std::isalnum(static_cast<unsigned char>(l[k])) || l[k] == '-' ||
                                l[k] == '_' || l[k] == '.')) {
          name += static_cast<char>(std::tolower(static_cast<unsigned char>(l[k])));
          ++k;
        }
        return name;
      }
    }
    if (end == std::string_view::npos) break;
    line_start = end + 1;
  }
  return {};
}

std::string latin1_to_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 8);
  for (unsigned char c : bytes) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::uint32_t line_of_offset(std::string_view bytes, std::size_t offset) {
  return 1 + static_cast<std::uint32_t>(std::count(bytes.begin(), bytes.begin() + offset, '\n'));
}

}  // namespace

DecodedSource decode_python_source(std::string_view bytes) {
  DecodedSource out;
  std::size_t nul = bytes.find('\0');
  if (nul != std::string_view::npos) {
    out.problem = fmt::format("binary file (NUL byte at offset {}), not Python source", nul);
    return out;
  }
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
  std::size_t bad = first_invalid_utf8(bytes);
  if (bad == std::string_view::npos) {
    out.text.assign(bytes);
    return out;
  }
  std::string encoding = declared_encoding(bytes);
  if (encoding.empty() || encoding == "utf-8" || encoding == "utf8" ||
      encoding.rfind("utf-8-", 0) == 0) {
    out.problem = fmt::format(
        "not UTF-8 text (byte 0x{:02x} at offset {}, line {}) and no other encoding declared",
        static_cast<unsigned char>(bytes[bad]), bad, line_of_offset(bytes, bad));
    return out;
  }
  out.text = latin1_to_utf8(bytes);
  return out;
}

std::optional<std::string_view> python_source_in_place(std::string_view bytes) {
  if (bytes.find('\0') != std::string_view::npos) return std::nullopt;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
  if (first_invalid_utf8(bytes) != std::string_view::npos) return std::nullopt;
  return bytes;
}

SourceMap::SourceMap(std::string_view text, std::string_view display)
    : text_(text), display_(display) {
  line_starts_.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') line_starts_.push_back(static_cast<std::uint32_t>(i + 1));
  }
}

std::uint32_t SourceMap::cell_of_row(std::uint32_t row) const {
  if (cells_.empty()) return 0;
  auto it = std::upper_bound(cells_.begin(), cells_.end(), row,
                             [](std::uint32_t r, const CellSpan& c) { return r < c.first_line; });
  if (it == cells_.begin()) return 0;
  return std::prev(it)->cell;
}

Position SourceMap::position(std::uint32_t row, std::uint32_t column_bytes) const {
  Position p;
  std::uint32_t line_in_cell = row;
  if (!cells_.empty()) {
    auto it = std::upper_bound(cells_.begin(), cells_.end(), row,
                               [](std::uint32_t r, const CellSpan& c) { return r < c.first_line; });
    if (it != cells_.begin()) line_in_cell = row - std::prev(it)->first_line;
  }
  p.line = line_in_cell + 1;
  // Count code points: every byte that is not a UTF-8 continuation byte.
  std::uint32_t column = 0;
  if (row < line_starts_.size()) {
    std::size_t start = line_starts_[row];
    for (std::size_t i = start; i < start + column_bytes && i < text_.size(); ++i) {
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;
    }
  }
  p.column = column + 1;
  return p;
}

std::string_view SourceMap::display_line(std::uint32_t row) const {
  if (row >= line_starts_.size()) return {};
  std::size_t start = line_starts_[row];
  std::size_t end = row + 1 < line_starts_.size() ? line_starts_[row + 1] - 1 : display_.size();
  if (start > display_.size()) return {};
  std::string_view line = display_.substr(start, end - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

std::vector<FrameLine> code_frame(const SourceMap& map, std::uint32_t first_row,
                                  std::uint32_t last_row) {
  constexpr std::uint32_t kContextRows = 2;
  constexpr std::uint32_t kMaxFlaggedRows = 4;
  std::vector<FrameLine> frame;
  if (map.row_count() == 0) return frame;
  last_row = std::min({last_row, first_row + kMaxFlaggedRows - 1, map.row_count() - 1});
  std::uint32_t cell = map.cell_of_row(first_row);
  std::uint32_t from = first_row >= kContextRows ? first_row - kContextRows : 0;
  std::uint32_t to = std::min(last_row + 1, map.row_count() - 1);
  for (std::uint32_t row = from; row <= to; ++row) {
    if (map.cell_of_row(row) != cell) continue;  // stay inside the notebook cell
    // Blank context lines carry nothing; flagged lines always show.
    std::string_view text = map.display_line(row);
    bool flagged = row >= first_row && row <= last_row;
    if (!flagged && text.find_first_not_of(" \t") == std::string_view::npos) continue;
    frame.push_back({map.position(row, 0).line, std::string(text)});
  }
  return frame;
}

}  // namespace gpuleak::lint
