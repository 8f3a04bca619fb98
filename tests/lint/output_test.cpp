#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "lint/output/lint_output.h"
#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

LintRun sample_run() {
  LintRun run;
  run.reports.push_back(
      testing::lint_snippet("import torch\n"
                            "def train(model, loader, opt, crit):\n"
                            "    total = 0\n"
                            "    for x, y in loader:\n"
                            "        opt.zero_grad()\n"
                            "        loss = crit(model(x), y)\n"
                            "        loss.backward()\n"
                            "        opt.step()\n"
                            "        total += loss\n"));
  run.reports.back().path = "dir with space/train.py";
  FileReport broken;
  broken.path = "broken.py";
  broken.problem = FileProblem{"cannot parse as Python 3: invalid syntax near `(`", {3, 7}, 0};
  run.reports.push_back(broken);
  run.missing.push_back("nope.py");
  return run;
}

TEST(lint_output, text_shows_location_rule_frame_caret_and_summary) {
  std::ostringstream out;
  write_text(out, sample_run(), false);
  std::string s = out.str();
  EXPECT_NE(s.find("dir with space/train.py:9:9: error GL101 loss-accumulated-with-graph"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("  > 9 |         total += loss"), std::string::npos) << s;
  EXPECT_NE(s.find("|         ^^^^^^^^^^^^^"), std::string::npos) << s;
  EXPECT_NE(s.find("cause: autograd graph kept"), std::string::npos);
  EXPECT_NE(s.find("fix:   `total += loss.item()`"), std::string::npos) << s;
  EXPECT_NE(s.find("Found 1 finding (1 error) in 1 of 2 files; 1 file could not be linted."),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("\033["), std::string::npos) << "colour without a terminal";
}

TEST(lint_output, colour_wraps_severity_when_asked) {
  std::ostringstream out;
  write_text(out, sample_run(), true);
  EXPECT_NE(out.str().find("\033[1;31merror\033[0m"), std::string::npos);
}

TEST(lint_output, json_has_every_documented_field) {
  std::ostringstream out;
  write_json(out, sample_run(), "9.9.9");
  auto doc = nlohmann::json::parse(out.str());
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["tool"]["version"], "9.9.9");
  ASSERT_EQ(doc["findings"].size(), 1u);
  const auto& f = doc["findings"][0];
  for (const char* key : {"rule", "name", "severity", "cause", "path", "cell", "line", "column",
                          "end_line", "end_column", "message", "why", "fix", "frame"}) {
    EXPECT_TRUE(f.contains(key)) << key;
  }
  EXPECT_EQ(f["rule"], "GL101");
  EXPECT_EQ(f["cause"], "autograd-graph-kept-alive");
  EXPECT_TRUE(f["cell"].is_null());
  EXPECT_EQ(f["line"], 9);
  ASSERT_EQ(doc["files_not_linted"].size(), 1u);
  EXPECT_EQ(doc["files_not_linted"][0]["line"], 3);
  EXPECT_EQ(doc["missing_paths"][0], "nope.py");
  EXPECT_EQ(doc["summary"]["by_rule"]["GL101"], 1);
  EXPECT_EQ(doc["summary"]["files"], 2);
}

TEST(lint_output, sarif_refers_to_rules_by_index_and_reports_unlinted_files) {
  std::ostringstream out;
  write_sarif(out, sample_run(), "9.9.9");
  auto doc = nlohmann::json::parse(out.str());
  EXPECT_EQ(doc["version"], "2.1.0");
  const auto& run = doc["runs"][0];
  const auto& rules = run["tool"]["driver"]["rules"];
  EXPECT_EQ(rules.size(), rule_catalog().size());
  const auto& result = run["results"][0];
  std::size_t index = result["ruleIndex"];
  EXPECT_EQ(rules[index]["id"], result["ruleId"]);
  const auto& location = result["locations"][0]["physicalLocation"];
  EXPECT_EQ(location["artifactLocation"]["uri"], "dir%20with%20space/train.py");
  EXPECT_EQ(location["region"]["startLine"], 9);
  EXPECT_FALSE(run["invocations"][0]["executionSuccessful"]);
  EXPECT_EQ(run["invocations"][0]["toolExecutionNotifications"].size(), 2u);
}

}  // namespace
}  // namespace gpuleak::lint
