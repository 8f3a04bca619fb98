#include <gtest/gtest.h>

#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

const char* kLoop =
    "import torch\n"
    "def train(model, loader, opt, crit):\n"
    "    total = 0\n"
    "    for x, y in loader:\n"
    "        opt.zero_grad()\n"
    "        loss = crit(model(x), y)\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        total += loss{COMMENT}\n"
    "        torch.cuda.empty_cache()\n";

std::string with_comment(const std::string& comment) {
  std::string s = kLoop;
  s.replace(s.find("{COMMENT}"), 9, comment);
  return s;
}

TEST(lint_suppression, listed_rule_is_suppressed_and_counted) {
  FileReport r = testing::lint_snippet(with_comment("  # gpuleak: ignore[GL101]"));
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].rule->id, "GL502");
  EXPECT_EQ(r.suppressed, 1u);
}

TEST(lint_suppression, other_rules_on_the_line_are_not_suppressed) {
  FileReport r = testing::lint_snippet(with_comment("  # gpuleak: ignore[GL503, GL203]"));
  EXPECT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.suppressed, 0u);
}

TEST(lint_suppression, bare_ignore_and_rule_names_work) {
  EXPECT_EQ(testing::lint_snippet(with_comment("  # gpuleak: ignore")).findings.size(), 1u);
  EXPECT_EQ(testing::lint_snippet(with_comment("  # gpuleak: ignore[loss-accumulated-with-graph]"))
                .findings.size(),
            1u);
  EXPECT_EQ(
      testing::lint_snippet(with_comment("  # noqa: E501 gpuleak:ignore[gl101]")).findings.size(),
      1u);
}

TEST(lint_suppression, text_inside_a_string_is_not_a_suppression) {
  FileReport r = testing::lint_snippet(with_comment("; note = '# gpuleak: ignore'"));
  EXPECT_EQ(r.findings.size(), 2u);
}

TEST(lint_suppression, empty_list_suppresses_nothing) {
  FileReport r = testing::lint_snippet(with_comment("  # gpuleak: ignore[]"));
  EXPECT_EQ(r.findings.size(), 2u);
}

}  // namespace
}  // namespace gpuleak::lint
