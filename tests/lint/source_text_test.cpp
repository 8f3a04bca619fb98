#include "lint/source_text.h"

#include <gtest/gtest.h>

namespace gpuleak::lint {
namespace {

TEST(lint_source_text, nul_byte_means_binary_with_its_offset) {
  DecodedSource d = decode_python_source(std::string_view("abc\0def", 7));
  EXPECT_NE(d.problem.find("binary"), std::string::npos);
  EXPECT_NE(d.problem.find("offset 3"), std::string::npos) << d.problem;
}

TEST(lint_source_text, invalid_utf8_without_coding_line_is_refused_with_line) {
  DecodedSource d = decode_python_source("x = 1\ny = '\xff'\n");
  EXPECT_NE(d.problem.find("not UTF-8"), std::string::npos) << d.problem;
  EXPECT_NE(d.problem.find("line 2"), std::string::npos) << d.problem;
  EXPECT_NE(d.problem.find("0xff"), std::string::npos) << d.problem;
}

TEST(lint_source_text, declared_latin1_is_converted_to_utf8) {
  DecodedSource d = decode_python_source("# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n");
  EXPECT_TRUE(d.problem.empty()) << d.problem;
  EXPECT_NE(d.text.find("caf\xc3\xa9"), std::string::npos);
}

TEST(lint_source_text, overlong_and_surrogate_sequences_are_invalid) {
  EXPECT_FALSE(decode_python_source("x = '\xc0\xaf'\n").problem.empty());
  EXPECT_FALSE(decode_python_source("x = '\xed\xa0\x80'\n").problem.empty());
  EXPECT_TRUE(decode_python_source("x = '\xe2\x82\xac'\n").problem.empty());
}

TEST(lint_source_text, byte_order_mark_is_dropped) {
  DecodedSource d = decode_python_source("\xEF\xBB\xBFx = 1\n");
  EXPECT_EQ(d.text, "x = 1\n");
}

TEST(lint_source_text, columns_count_code_points_not_bytes) {
  std::string text = "\xc3\xa9t\xc3\xa9 = model(x)\n";  // "été = model(x)"
  SourceMap map(text, text);
  // `model` starts at byte 8 but at code point 7 (1-based column 7).
  Position p = map.position(0, 8);
  EXPECT_EQ(p.line, 1u);
  EXPECT_EQ(p.column, 7u);
}

TEST(lint_source_text, notebook_rows_map_to_cell_and_line_in_cell) {
  std::string text = "a = 1\nb = 2\nc = 3\nd = 4\n";
  SourceMap map(text, text);
  map.set_cells({{2, 0}, {5, 2}});
  EXPECT_EQ(map.cell_of_row(1), 2u);
  EXPECT_EQ(map.cell_of_row(3), 5u);
  Position p = map.position(3, 0);
  EXPECT_EQ(p.line, 2u);
}

TEST(lint_source_text, code_frame_has_context_and_skips_blank_lines) {
  std::string text = "a = 1\n\nb = 2\nc = 3\nd = 4\n";
  SourceMap map(text, text);
  std::vector<FrameLine> frame = code_frame(map, 3, 3);
  ASSERT_EQ(frame.size(), 3u);  // the blank line 2 is skipped
  EXPECT_EQ(frame[0].line, 3u);
  EXPECT_EQ(frame[1].text, "c = 3");
  EXPECT_EQ(frame[2].line, 5u);
}

}  // namespace
}  // namespace gpuleak::lint
