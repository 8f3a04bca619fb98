#include "lint/file_discovery.h"

#include <gtest/gtest.h>

#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

std::vector<std::string> relative(const DiscoveredFiles& d, const std::filesystem::path& root) {
  std::vector<std::string> out;
  for (const auto& f : d.files) out.push_back(f.lexically_relative(root).generic_string());
  return out;
}

TEST(lint_file_discovery, walks_folders_for_python_and_notebooks_only) {
  testing::ScratchFolder dir("discover");
  dir.write("train.py", "");
  dir.write("nb/explore.ipynb", "{}");
  dir.write("notes.txt", "");
  dir.write("pkg/model.py", "");
  dir.write(".venv/lib/site.py", "");
  dir.write("pkg/__pycache__/model.cpython-311.py", "");
  dir.write("node_modules/x/y.py", "");
  DiscoveredFiles d = discover_files({dir.path().string()}, {});
  EXPECT_EQ(relative(d, dir.path()),
            (std::vector<std::string>{"nb/explore.ipynb", "pkg/model.py", "train.py"}));
  EXPECT_TRUE(d.missing.empty());
}

TEST(lint_file_discovery, exclude_patterns_match_names_and_relative_paths) {
  testing::ScratchFolder dir("discover-exclude");
  dir.write("train.py", "");
  dir.write("build/gen.py", "");
  dir.write("proto/msg_pb2.py", "");
  dir.write("tests/fixtures/bad.py", "");
  DiscoveredFiles d =
      discover_files({dir.path().string()}, {"build", "*_pb2.py", "tests/fixtures/*"});
  EXPECT_EQ(relative(d, dir.path()), (std::vector<std::string>{"train.py"}));
}

TEST(lint_file_discovery, named_files_are_always_linted_and_missing_ones_reported) {
  testing::ScratchFolder dir("discover-named");
  auto script = dir.write("run_training", "import torch\n");
  DiscoveredFiles d = discover_files({script.string(), (dir.path() / "nope.py").string()}, {});
  ASSERT_EQ(d.files.size(), 1u);
  EXPECT_EQ(d.files[0], script);
  ASSERT_EQ(d.missing.size(), 1u);
  EXPECT_NE(d.missing[0].find("nope.py"), std::string::npos);
}

TEST(lint_file_discovery, symlinked_folder_cycles_are_not_followed) {
  testing::ScratchFolder dir("discover-cycle");
  dir.write("a/train.py", "");
  std::filesystem::create_directory_symlink(dir.path() / "a", dir.path() / "a" / "loop");
  DiscoveredFiles d = discover_files({dir.path().string()}, {});
  EXPECT_EQ(relative(d, dir.path()), (std::vector<std::string>{"a/train.py"}));
}

TEST(lint_file_discovery, the_same_file_twice_is_linted_once) {
  testing::ScratchFolder dir("discover-dup");
  auto f = dir.write("train.py", "");
  DiscoveredFiles d = discover_files({f.string(), dir.path().string()}, {});
  EXPECT_EQ(d.files.size(), 1u);
}

}  // namespace
}  // namespace gpuleak::lint
