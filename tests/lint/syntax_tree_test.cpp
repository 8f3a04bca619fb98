#include "lint/syntax_tree.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpuleak::lint {
namespace {

NodeId find_kind(const SyntaxTree& tree, NodeKind kind) {
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (tree.kind(id) == kind) return id;
  }
  return kNoNode;
}

TEST(lint_syntax_tree, builds_preorder_array_with_fields_and_subtree_ranges) {
  PythonParser parser;
  std::string source = "total = model(x) + 1\n";
  ParseResult r = parser.parse(source);
  ASSERT_TRUE(r.tree);
  const SyntaxTree& tree = *r.tree;
  EXPECT_FALSE(tree.has_error());
  NodeId call = find_kind(tree, NodeKind::kCall);
  ASSERT_NE(call, kNoNode);
  EXPECT_EQ(tree.text(call), "model(x)");
  NodeId callee = tree.child_by_field(call, Field::kFunction);
  EXPECT_EQ(tree.text(callee), "model");
  NodeId assignment = find_kind(tree, NodeKind::kAssignment);
  EXPECT_TRUE(tree.contains(assignment, call));
  EXPECT_FALSE(tree.contains(call, assignment));
  EXPECT_EQ(tree.ancestor_of_kind(call, {NodeKind::kAssignment}), assignment);
  EXPECT_EQ(tree.text(tree.child_by_field(assignment, Field::kLeft)), "total");
}

TEST(lint_syntax_tree, points_at_the_syntax_error_not_the_file_start) {
  PythonParser parser;
  std::string source = "import torch\n\n\ndef f(:\n    pass\n";
  ParseResult r = parser.parse(source);
  ASSERT_TRUE(r.tree);
  ASSERT_TRUE(r.tree->has_error());
  EXPECT_EQ(r.tree->start_point(r.tree->first_error()).row, 3u);
}

TEST(lint_syntax_tree, refuses_nesting_deeper_than_it_analyses) {
  PythonParser parser;
  // Unary minus nests without brackets.
  std::size_t depth = PythonParser::kMaxDepth + 100;
  std::string source = "x = " + std::string(depth, '-') + "1\n";
  ParseResult r = parser.parse(source);
  EXPECT_FALSE(r.tree);
  EXPECT_NE(r.failure.find("nested"), std::string::npos) << r.failure;
}

TEST(lint_syntax_tree, refuses_brackets_nested_deeper_than_python_allows) {
  PythonParser parser;
  // Past about 65 thousand levels libtree-sitter 0.20.7 corrupts its heap.
  std::string source(70000, '(');
  ParseResult r = parser.parse(source);
  EXPECT_FALSE(r.tree);
  EXPECT_NE(r.failure.find("brackets"), std::string::npos) << r.failure;
  std::string fine = "x = " + std::string(150, '(') + "1" + std::string(150, ')') + "\n";
  EXPECT_TRUE(parser.parse(fine).tree);
}

TEST(lint_syntax_tree, empty_source_is_an_empty_module) {
  PythonParser parser;
  ParseResult r = parser.parse("");
  ASSERT_TRUE(r.tree);
  EXPECT_FALSE(r.tree->has_error());
  EXPECT_EQ(r.tree->kind(r.tree->root()), NodeKind::kModule);
}

TEST(lint_syntax_tree, a_large_file_parsed_in_runs_gives_the_tree_of_one_parse) {
  // Over kParsedInRunsAboveBytes the file is cut between top-level
  // statements; the cuts must avoid strings, brackets, decorators and
  // else/except clauses, and the tree must be one module of every statement.
  std::string block =
      "import torch\n"
      "@decorator\n"
      "def train(model, loader):\n"
      "    text = \"\"\"a string\ndef not_a_statement():\n\"\"\"\n"
      "    total = (1 +\n"
      "             2)\n"
      "    return total\n"
      "if x:\n"
      "    y = 1\n"
      "else:\n"
      "    y = 2\n"
      "try:\n"
      "    z = 1\n"
      "except Exception:\n"
      "    z = 2\n"
      "values = [1,\n"
      "2]\n"
      "warn(\"deprecated, \\\n"
      "use 'x' instead\")\n";
  std::string source;
  std::size_t blocks = 0;
  while (source.size() <= PythonParser::kParsedInRunsAboveBytes + 1000) {
    source += block;
    ++blocks;
  }
  auto runs = PythonParser::top_level_runs(source, PythonParser::kRunBytes);
  EXPECT_GT(runs.size(), 2u);
  // A string whose newline is escaped must not turn the scan inside out
  // (it did: one run held the rest of a 10 MB file).
  for (auto [from, to] : runs) EXPECT_LE(to - from, PythonParser::kRunBytes + block.size()) << from;
  for (auto [from, to] : runs) {
    EXPECT_TRUE(from == 0 || source.compare(from, 13, "import torch\n") == 0 ||
                source[from - 1] == '\n')
        << from;
  }
  PythonParser parser;
  ParseResult r = parser.parse(source);
  ASSERT_TRUE(r.tree);
  EXPECT_FALSE(r.tree->has_error());
  std::size_t statements = r.tree->named_children(r.tree->root()).size();
  EXPECT_EQ(statements, blocks * 6);  // import, def, if, try, values, warn
  EXPECT_EQ(r.tree->node(r.tree->root()).subtree_end, r.tree->size());
  NodeId last = r.tree->named_children(r.tree->root()).back();
  EXPECT_EQ(r.tree->start_point(last).row, blocks * 21 - 2);
}

TEST(lint_syntax_tree, a_large_file_with_one_broken_statement_keeps_the_others_and_points_at_it) {
  // A run that does not parse keeps its error nodes instead of sending the
  // whole file to one parse (which held tree-sitter's tree for all of it, some
  // 20 bytes per source byte: bench/lint/lint_speed.py checks the memory).
  // Here: the error is found where it is, and the statements around it parse.
  std::string block =
      "def train(model, loader):\n"
      "    total = (1 +\n"
      "             2)\n"
      "    return total\n";
  std::string source = "import torch\n";
  std::size_t blocks = 0;
  std::size_t broken_row = 0;
  while (source.size() <= PythonParser::kParsedInRunsAboveBytes * 2) {
    if (blocks == 2000) {
      broken_row = static_cast<std::size_t>(std::count(source.begin(), source.end(), '\n'));
      source += "value = [1, 2 3]\n";
    }
    source += block;
    ++blocks;
  }
  ASSERT_GT(broken_row, 0u);
  PythonParser parser;
  ParseResult r = parser.parse(source);
  ASSERT_TRUE(r.tree) << r.failure;
  ASSERT_TRUE(r.tree->has_error());
  EXPECT_EQ(r.tree->start_point(r.tree->first_error()).row, broken_row);
  std::size_t functions = 0;
  for (NodeId c : r.tree->named_children(r.tree->root())) {
    functions += r.tree->kind(c) == NodeKind::kFunctionDefinition && !r.tree->node(c).error;
  }
  EXPECT_GE(functions, blocks - 2) << "the functions around the broken line are parsed";
}

}  // namespace
}  // namespace gpuleak::lint
