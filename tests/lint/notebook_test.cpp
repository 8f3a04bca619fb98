#include "lint/notebook.h"

#include <gtest/gtest.h>

#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

const char* kNotebook = R"({
 "cells": [
  {"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
  {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["%matplotlib inline\n", "import torch\n", "  !ls\n"]},
  {"cell_type": "code", "metadata": {}, "outputs": [], "source": "%%bash\necho hi"},
  {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["x = 1"]}
 ],
 "metadata": {"kernelspec": {"language": "python"}},
 "nbformat": 4, "nbformat_minor": 5
})";

TEST(lint_notebook, joins_code_cells_and_comments_out_ipython_syntax) {
  NotebookCode nb = extract_notebook_code(kNotebook);
  ASSERT_TRUE(nb.problem.empty()) << nb.problem;
  EXPECT_EQ(nb.code, "#matplotlib inline\nimport torch\n  #ls\n#%bash\n#cho hi\nx = 1\n");
  EXPECT_EQ(nb.display, "%matplotlib inline\nimport torch\n  !ls\n%%bash\necho hi\nx = 1\n");
  ASSERT_EQ(nb.cells.size(), 3u);
  EXPECT_EQ(nb.cells[0].cell, 2u);  // cells count from 1, markdown included
  EXPECT_EQ(nb.cells[1].first_line, 3u);
  EXPECT_EQ(nb.cells[2].cell, 4u);
  EXPECT_EQ(nb.cells[2].first_line, 5u);
}

TEST(lint_notebook, invalid_json_is_a_problem_with_its_byte_offset) {
  NotebookCode nb = extract_notebook_code("{\"cells\": [");
  EXPECT_NE(nb.problem.find("invalid JSON"), std::string::npos) << nb.problem;
}

TEST(lint_notebook, other_kernel_languages_are_refused) {
  NotebookCode nb = extract_notebook_code(
      R"({"cells": [], "metadata": {"kernelspec": {"language": "R"}}, "nbformat": 4})");
  EXPECT_NE(nb.problem.find("'r'"), std::string::npos) << nb.problem;
}

TEST(lint_notebook, reads_nbformat3_worksheets) {
  NotebookCode nb = extract_notebook_code(
      R"({"worksheets": [{"cells": [{"cell_type": "code", "input": ["y = 2\n"]}]}], "nbformat": 3})");
  ASSERT_TRUE(nb.problem.empty()) << nb.problem;
  EXPECT_EQ(nb.code, "y = 2\n");
}

TEST(lint_notebook, findings_carry_cell_number_and_line_within_cell) {
  std::string nb = R"({"cells": [
    {"cell_type": "code", "source": ["import torch\n", "model = build()\n"]},
    {"cell_type": "markdown", "source": ["text"]},
    {"cell_type": "code", "source": ["total = 0\n", "for x, y in loader:\n", "    opt.zero_grad()\n", "    loss = crit(model(x), y)\n", "    loss.backward()\n", "    opt.step()\n", "    total += loss\n"]}
  ], "metadata": {}, "nbformat": 4})";
  Linter linter;
  FileReport report = linter.lint_notebook("train.ipynb", nb);
  ASSERT_FALSE(report.problem) << report.problem->message;
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].cell, 3u);
  EXPECT_EQ(report.findings[0].start.line, 7u);
  EXPECT_EQ(report.findings[0].start.column, 5u);
}

TEST(lint_notebook, a_cell_that_does_not_parse_is_named_and_the_other_cells_are_linted) {
  std::string nb = R"({"cells": [
    {"cell_type": "code", "source": ["import torch\n"]},
    {"cell_type": "code", "source": ["x = (1,\n"]},
    {"cell_type": "code", "source": ["total = 0\n", "for x, y in loader:\n", "    loss = crit(model(x), y)\n", "    loss.backward()\n", "    total += loss\n"]}
  ], "metadata": {}, "nbformat": 4})";
  Linter linter;
  FileReport report = linter.lint_notebook("broken.ipynb", nb);
  ASSERT_FALSE(report.problem) << report.problem->message;
  ASSERT_EQ(report.unparsed.size(), 1u);
  EXPECT_EQ(report.unparsed[0].cell, 2u);
  EXPECT_EQ(report.unparsed[0].position.line, 1u);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].cell, 3u);
  EXPECT_EQ(report.findings[0].start.line, 5u);
}

TEST(lint_notebook, a_notebook_whose_code_is_mostly_broken_is_not_linted) {
  std::string nb = R"({"cells": [
    {"cell_type": "code", "source": ["import torch\n"]},
    {"cell_type": "code", "source": ["def f(:\n", "  x = [1, 2,\n", "  y = ((((\n"]}
  ], "metadata": {}, "nbformat": 4})";
  Linter linter;
  FileReport report = linter.lint_notebook("broken.ipynb", nb);
  ASSERT_TRUE(report.problem);
  EXPECT_EQ(report.problem->cell, 2u);
}

}  // namespace
}  // namespace gpuleak::lint
