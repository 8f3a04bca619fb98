// The text the analysis reads, and how byte offsets map back to what a
// person sees (line, column in code points, notebook cell).
//
// Python source is UTF-8 unless a PEP 263 coding line says otherwise; bytes
// that are neither are refused with the offset of the first bad byte, the
// way Python refuses them. NUL bytes mean a binary file (Python 3.12 refuses
// them too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lint.h"

namespace gpuleak::lint {

struct DecodedSource {
  std::string text;     // UTF-8, without a byte-order mark
  std::string problem;  // non-empty: why the bytes are not Python text
};

// Checks and, for a declared single-byte encoding, converts to UTF-8. Files
// that declare another encoding are read as Latin-1: line structure and
// ASCII code survive, which is all the rules read.
DecodedSource decode_python_source(std::string_view bytes);

// The text decode_python_source would return, as a view into `bytes`, when
// no conversion is needed (UTF-8 without NUL bytes, the usual case): a large
// file is then linted without a second copy of itself.
std::optional<std::string_view> python_source_in_place(std::string_view bytes);

// Where each line starts, and the notebook cell each line came from.
class SourceMap {
 public:
  // `text` is what was parsed; `display` has the same lines as the user wrote
  // them (they differ only for notebook magics). Both must outlive the map.
  SourceMap(std::string_view text, std::string_view display);

  struct CellSpan {
    std::uint32_t cell;        // 1-based cell number
    std::uint32_t first_line;  // 0-based line in `text` where the cell starts
  };
  void set_cells(std::vector<CellSpan> cells) { cells_ = std::move(cells); }

  // 0-based row and byte column (tree-sitter's point) -> what a person reads.
  Position position(std::uint32_t row, std::uint32_t column_bytes) const;
  std::uint32_t cell_of_row(std::uint32_t row) const;  // 0 outside notebooks
  std::uint32_t row_count() const { return static_cast<std::uint32_t>(line_starts_.size()); }
  // Byte offset where the 0-based row starts; the text's size past the end.
  std::uint32_t line_start(std::uint32_t row) const {
    return row < line_starts_.size() ? line_starts_[row] : static_cast<std::uint32_t>(text_.size());
  }
  std::string_view display_line(std::uint32_t row) const;  // without the line break

 private:
  std::string_view text_;
  std::string_view display_;
  std::vector<std::uint32_t> line_starts_;  // byte offsets in both text and display
  std::vector<CellSpan> cells_;
};

// A few lines around rows [first_row, last_row], numbered as in Position.
std::vector<FrameLine> code_frame(const SourceMap& map, std::uint32_t first_row,
                                  std::uint32_t last_row);

}  // namespace gpuleak::lint
