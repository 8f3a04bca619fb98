#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "lint/lint.h"
#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

std::set<std::string> enabled(const RuleSelection& s) {
  std::set<std::string> out;
  for (const RuleInfo* r : rule_catalog()) {
    if (s.enabled(*r)) out.emplace(r->id);
  }
  return out;
}

TEST(lint_rule_selection, default_runs_every_rule) {
  EXPECT_EQ(enabled(RuleSelection()).size(), rule_catalog().size());
}

TEST(lint_rule_selection, prefixes_ids_and_names_select) {
  RuleSelection s({"GL1", "gl301", "empty-cache-in-loop"}, {});
  EXPECT_EQ(enabled(s),
            (std::set<std::string>{"GL101", "GL102", "GL103", "GL104", "GL105", "GL301", "GL502"}));
}

TEST(lint_rule_selection, ignore_wins_over_select) {
  RuleSelection s({"GL1"}, {"GL102"});
  EXPECT_EQ(enabled(s), (std::set<std::string>{"GL101", "GL103", "GL104", "GL105"}));
}

TEST(lint_rule_selection, unknown_entry_is_refused_by_name) {
  try {
    RuleSelection s({"GL999"}, {});
    FAIL() << "accepted an unknown rule";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("GL999"), std::string::npos);
  }
  EXPECT_THROW(RuleSelection({}, {"G"}), std::invalid_argument);
}

TEST(lint_rule_selection, catalog_ids_are_unique_sorted_and_documented) {
  std::string previous;
  for (const RuleInfo* r : rule_catalog()) {
    EXPECT_LT(previous, std::string(r->id));
    previous = r->id;
    EXPECT_FALSE(r->summary.empty());
    EXPECT_FALSE(r->why.empty());
    EXPECT_FALSE(r->fix.empty());
    EXPECT_EQ(find_rule(r->id), r);
    EXPECT_EQ(find_rule(r->name), r);
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(GPULEAK_SOURCE_DIR) / "docs" /
                                        "rules" / (std::string(r->id) + ".md")))
        << "docs/rules/" << r->id << ".md is missing";
  }
}

TEST(lint_rule_selection, selection_limits_what_the_linter_reports) {
  std::string source =
      "import torch\n"
      "def train(model, loader, opt, crit):\n"
      "    for x, y in loader:\n"
      "        loss = crit(model(x), y)\n"
      "        loss.backward()\n"
      "        opt.step()\n"
      "        torch.cuda.empty_cache()\n";
  EXPECT_EQ(testing::rule_ids(source), (std::vector<std::string>{"GL503", "GL502"}));
  LintOptions only;
  only.selection = RuleSelection({"GL5"}, {"GL503"});
  FileReport r = testing::lint_snippet(source, only);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].rule->id, "GL502");
}

}  // namespace
}  // namespace gpuleak::lint
