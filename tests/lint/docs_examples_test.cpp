// The bad and good examples in docs/rules/<ID>.md are real: the bad one is
// reported by that rule (and only that rule), the good one by none.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

std::string python_block_after(const std::string& doc, const std::string& heading) {
  std::size_t at = doc.find("\n" + heading + "\n");
  if (at == std::string::npos) return {};
  std::size_t open = doc.find("```python\n", at);
  if (open == std::string::npos) return {};
  open += 10;
  std::size_t close = doc.find("```", open);
  return close == std::string::npos ? std::string() : doc.substr(open, close - open);
}

TEST(lint_docs, every_rule_page_has_a_bad_example_it_reports_and_a_good_one_it_does_not) {
  for (const RuleInfo* rule : rule_catalog()) {
    std::filesystem::path page = std::filesystem::path(GPULEAK_SOURCE_DIR) / "docs" / "rules" /
                                 (std::string(rule->id) + ".md");
    std::ifstream in(page);
    ASSERT_TRUE(in) << page;
    std::stringstream s;
    s << in.rdbuf();
    std::string doc = s.str();
    EXPECT_EQ(doc.rfind("# " + std::string(rule->id) + " " + std::string(rule->name) + "\n", 0), 0u)
        << page << " starts with its id and name";
    for (const char* section :
         {"## What it finds", "## Why it matters", "## How to fix", "## Suppress"}) {
      EXPECT_NE(doc.find(section), std::string::npos) << page << " lacks " << section;
    }
    std::string bad = python_block_after(doc, "## Bad");
    std::string good = python_block_after(doc, "## Good");
    ASSERT_FALSE(bad.empty()) << page;
    ASSERT_FALSE(good.empty()) << page;
    std::vector<std::string> bad_ids = testing::rule_ids(bad);
    EXPECT_FALSE(bad_ids.empty()) << rule->id << ": the bad example is not reported";
    for (const auto& id : bad_ids) EXPECT_EQ(id, rule->id) << "bad example of " << rule->id;
    EXPECT_TRUE(testing::rule_ids(good).empty())
        << rule->id << ": the good example is reported: " << testing::rule_ids(good).front();
  }
}

}  // namespace
}  // namespace gpuleak::lint
