// A large file is parsed in pieces (top-level runs, and the largest block of
// a huge statement cut between its statements: block_cuts.h) so that
// tree-sitter's tree never covers the whole file. The pieces must give the
// very tree one parse gives: every node's kind, field, flags, offsets,
// parent and subtree. Here the pieces are made tiny so that ordinary files
// are cut everywhere they can be.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "lint/block_cuts.h"
#include "lint/syntax_tree.h"

namespace gpuleak::lint {
namespace {

namespace fs = std::filesystem;

constexpr PythonParser::Pieces kWhole{std::numeric_limits<std::size_t>::max(),
                                      std::numeric_limits<std::size_t>::max(),
                                      std::numeric_limits<std::size_t>::max()};
constexpr PythonParser::Pieces kTiny{0, 64, 128};

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first node where the two trees differ, described; empty when equal.
std::string first_difference(const SyntaxTree& whole, const SyntaxTree& pieces) {
  if (whole.size() != pieces.size()) {
    return "node count " + std::to_string(whole.size()) + " vs " + std::to_string(pieces.size());
  }
  for (NodeId id = 0; id < whole.size(); ++id) {
    const SyntaxNode& a = whole.node(id);
    const SyntaxNode& b = pieces.node(id);
    if (a.kind != b.kind || a.field != b.field || a.named != b.named || a.error != b.error ||
        a.symbol != b.symbol || a.start_byte != b.start_byte || a.end_byte != b.end_byte ||
        a.parent != b.parent || a.subtree_end != b.subtree_end) {
      return "node " + std::to_string(id) + " (" + std::string(whole.type_name(id)) + " at byte " +
             std::to_string(a.start_byte) + "-" + std::to_string(a.end_byte) +
             ", pieces: " + std::string(pieces.type_name(id)) + " at " +
             std::to_string(b.start_byte) + "-" + std::to_string(b.end_byte) + ")";
    }
  }
  if (whole.first_error() != pieces.first_error() || whole.depth() != pieces.depth()) {
    return "first error or depth";
  }
  return {};
}

// Checks every .py file under `root` that parses without errors; returns
// how many were compared.
std::size_t expect_same_trees_under(const fs::path& root) {
  PythonParser parser;
  std::size_t compared = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".py") continue;
    std::string source = read(entry.path());
    ParseResult whole = parser.parse(source, kWhole);
    // A file with a syntax error gets error nodes where each piece recovers:
    // those trees differ on purpose (the statements around the error parse).
    if (!whole.tree || whole.tree->has_error()) continue;
    ParseResult pieces = parser.parse(source, kTiny);
    EXPECT_TRUE(pieces.tree) << entry.path() << ": " << pieces.failure;
    if (!pieces.tree) continue;
    EXPECT_EQ(first_difference(*whole.tree, *pieces.tree), "") << entry.path();
    ++compared;
  }
  return compared;
}

TEST(lint_parse_in_pieces, every_corpus_file_cut_into_tiny_pieces_gives_the_tree_of_one_parse) {
  fs::path lint_tests = fs::path(GPULEAK_SOURCE_DIR) / "tests" / "lint";
  EXPECT_GT(expect_same_trees_under(lint_tests / "corpus"), 50u);
  EXPECT_GT(expect_same_trees_under(lint_tests / "reported"), 40u);
  // Any other tree, for a check by hand (Debian's dist-packages, the
  // standard library): GPULEAK_LINT_PIECES_TREE=/usr/lib/python3/dist-packages.
  if (const char* extra = std::getenv("GPULEAK_LINT_PIECES_TREE")) {
    std::size_t compared = expect_same_trees_under(extra);
    std::cout << compared << " files of " << extra << " compared\n";
  }
}

// One function whose loop holds everything, with what a cut must respect:
// comments (also dedented ones), blank lines, brackets and strings over
// several lines, decorators, else/except clauses, nested blocks, a loop
// `else`, and statements after the loop.
std::string one_huge_function(std::size_t repeats) {
  std::string source = "import torch\n\n\n@decorate\ndef train(model, loader):\n";
  // The loop's first statement, which the skeleton keeps, ends with a `;`
  // (a child of the block, past the statement): the block ends where its
  // last piece does, not that far past the last statement.
  source += "    total = 0\n    for x, y in loader:\n        first = 0;\n";
  for (std::size_t i = 0; i < repeats; ++i) {
    std::string n = std::to_string(i);
    source += fmt::format("        out_{0} = model(x.cuda()) * {0}\n", n);
    source += "        # a comment between statements\n";
    source += fmt::format(
        "        if out_{0}.sum() > 0:\n            total += out_{0}\n        elif x:\n"
        "            pass\n        else:\n            total = 0\n",
        n);
    source += "# a comment at column 0 inside the loop\n\n";
    source += "        text = \"\"\"a string\nat column 0 " + n + "\n\"\"\"\n";
    // (tree-sitter-python rejects a bracket's line indented less than its block)
    source += "        values = [1,\n          2, (3 +\n              4)]\n";
    source +=
        "        try:\n            y = y.cuda()\n        except Exception as e:\n"
        "            raise\n        finally:\n            pass\n";
    source += "        @decorate\n        def inner_" + n + "(v):\n            return v\n";
    source += "        warn(\"deprecated, \\\nuse x\")\n";
  }
  source += "        # the loop's last comment\n    else:\n        total = -1\n";
  source += "    return total\n\n\nresult = train(None, [])\n";
  return source;
}

TEST(lint_parse_in_pieces, a_function_holding_the_file_is_cut_inside_its_loop) {
  std::string source = one_huge_function(400);
  std::optional<BlockCuts> cuts =
      find_block_cuts(source, 0, static_cast<std::uint32_t>(source.size()), 4096);
  ASSERT_TRUE(cuts);
  EXPECT_GT(cuts->cuts.size(), 20u);
  EXPECT_EQ(source.compare(cuts->block_start, 12, "first = 0;\n "), 0) << "the loop's body";
  for (std::uint32_t at : cuts->cuts) EXPECT_EQ(source[at - 1], '\n');
  for (std::size_t i = 0; i + 1 < cuts->cuts.size(); ++i) {
    // A statement of the loop's body, after a line of code.
    std::uint32_t at = cuts->cuts[i];
    EXPECT_EQ(source.compare(at, 8, "        "), 0) << at;
    EXPECT_NE(source[at + 8], ' ') << at;
    std::size_t previous_line = source.rfind('\n', at - 2) + 1;
    char previous_first = source[source.find_first_not_of(' ', previous_line)];
    EXPECT_TRUE(previous_first != '#' && previous_first != '\n') << at;
  }
  PythonParser parser;
  ParseResult whole = parser.parse(source, kWhole);
  ASSERT_TRUE(whole.tree);
  ASSERT_FALSE(whole.tree->has_error());
  for (PythonParser::Pieces pieces :
       {PythonParser::Pieces{0, 4096, 8192}, kTiny, PythonParser::Pieces{0, 1u << 20, 1u << 20}}) {
    ParseResult cut = parser.parse(source, pieces);
    ASSERT_TRUE(cut.tree) << cut.failure;
    EXPECT_EQ(first_difference(*whole.tree, *cut.tree), "") << pieces.run_bytes;
  }
}

TEST(lint_parse_in_pieces, a_broken_piece_sends_the_statement_back_to_one_parse) {
  // A syntax error inside the loop: the cut parse stops and the statement is
  // parsed whole, so the error nodes are those one parse makes.
  std::string source = one_huge_function(200);
  std::size_t at = source.find("out_100 = model");
  ASSERT_NE(at, std::string::npos);
  source.insert(at, "value = [1, 2 3]\n        ");
  PythonParser parser;
  ParseResult whole = parser.parse(source, kWhole);
  ParseResult cut = parser.parse(source, PythonParser::Pieces{0, 4096, 8192});
  ASSERT_TRUE(whole.tree);
  ASSERT_TRUE(cut.tree);
  ASSERT_TRUE(cut.tree->has_error());
  EXPECT_EQ(first_difference(*whole.tree, *cut.tree), "");
  EXPECT_EQ(cut.tree->start_point(cut.tree->first_error()).row,
            whole.tree->start_point(whole.tree->first_error()).row);
}

}  // namespace
}  // namespace gpuleak::lint
