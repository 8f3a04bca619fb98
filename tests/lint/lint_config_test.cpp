#include "lint/lint_config.h"

#include <gtest/gtest.h>

#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

TEST(lint_config, reads_select_ignore_and_exclude) {
  testing::ScratchFolder dir("config-read");
  auto file = dir.write("pyproject.toml",
                        "[project]\nname = \"x\"\n\n[tool.gpuleak]\nselect = [\"GL1\", \"GL301\"]\n"
                        "ignore = \"GL103\"\nexclude = [\"build\", \"*_pb2.py\"]\n"
                        "[tool.gpuleak.run]\nfail-on-leak = true\n");
  LintConfig c = load_config(file);
  EXPECT_EQ(c.select, (std::vector<std::string>{"GL1", "GL301"}));
  EXPECT_EQ(c.ignore, (std::vector<std::string>{"GL103"}));
  EXPECT_EQ(c.exclude, (std::vector<std::string>{"build", "*_pb2.py"}));
  EXPECT_EQ(c.source, file);
}

TEST(lint_config, unknown_key_is_refused_with_its_line_and_the_key_it_resembles) {
  testing::ScratchFolder dir("config-unknown");
  auto file =
      dir.write("pyproject.toml", "[tool.gpuleak]\nselect = [\"GL1\"]\nexlcude = [\"build\"]\n");
  try {
    load_config(file);
    FAIL() << "accepted a misspelt key";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("pyproject.toml:3:1: unknown key `exlcude`"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean `exclude`"), std::string::npos) << m;
  }
}

TEST(lint_config, wrong_type_names_file_line_and_key) {
  testing::ScratchFolder dir("config-type");
  auto file = dir.write("pyproject.toml", "[tool.gpuleak]\n\nselect = [1, 2]\n");
  try {
    load_config(file);
    FAIL() << "accepted a list of numbers";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("pyproject.toml:3:"), std::string::npos) << m;
    EXPECT_NE(m.find("select"), std::string::npos) << m;
  }
}

TEST(lint_config, invalid_toml_reports_line_and_column) {
  testing::ScratchFolder dir("config-syntax");
  auto file = dir.write("pyproject.toml", "[tool.gpuleak]\nselect = [\"GL1\"\n");
  try {
    load_config(file);
    FAIL() << "accepted broken TOML";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("invalid TOML"), std::string::npos) << m;
    EXPECT_NE(m.find("pyproject.toml:"), std::string::npos) << m;
  }
}

TEST(lint_config, found_in_a_parent_folder_skipping_ones_without_the_table) {
  testing::ScratchFolder dir("config-find");
  dir.write("pyproject.toml", "[tool.gpuleak]\nignore = [\"GL503\"]\n");
  dir.write("pkg/pyproject.toml", "[tool.black]\nline-length = 100\n");
  auto source = dir.write("pkg/sub/train.py", "x = 1\n");
  auto found = find_config(source);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->source, dir.path() / "pyproject.toml");
  EXPECT_EQ(found->ignore, (std::vector<std::string>{"GL503"}));
}

TEST(lint_config, none_found_is_not_an_error) { EXPECT_FALSE(find_config("/")); }

}  // namespace
}  // namespace gpuleak::lint
