// The front end never crashes: mutated corpus files, random bytes and
// pathological shapes all come back as findings or as a clear problem.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "lint/lint.h"

namespace gpuleak::lint {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> corpus_sources() {
  std::vector<std::string> out;
  fs::path root = fs::path(GPULEAK_SOURCE_DIR) / "tests" / "lint" / "corpus";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".py") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    out.push_back(s.str());
  }
  return out;
}

// Either a clean report or one clear problem, never both, never empty text.
void expect_well_formed(const FileReport& r) {
  if (r.problem) {
    EXPECT_FALSE(r.problem->message.empty());
    EXPECT_TRUE(r.findings.empty());
  }
  for (const Finding& f : r.findings) {
    EXPECT_FALSE(f.message.empty());
    EXPECT_GE(f.start.line, 1u);
    EXPECT_GE(f.start.column, 1u);
  }
}

TEST(lint_robustness, mutated_corpus_files_never_crash) {
  std::vector<std::string> sources = corpus_sources();
  ASSERT_FALSE(sources.empty());
  std::mt19937 random(20240611);  // fixed: failures reproduce
  const std::string tokens[] = {"(",
                                ")",
                                "[",
                                "]",
                                ":",
                                "\n",
                                "    ",
                                "'",
                                "\"\"\"",
                                "\\",
                                "for x in loader:\n",
                                "with torch.no_grad():\n",
                                "lambda",
                                ".backward(",
                                "+=",
                                "\t",
                                "#",
                                "\xff",
                                "\xc3",
                                "\0"};
  Linter linter;
  // A fixed number of mutations from a fixed seed: every run of the test
  // lints the same inputs, however fast or loaded the machine is.
  constexpr int kMutations = 400;
  for (int run = 0; run < kMutations; ++run) {
    std::string s = sources[random() % sources.size()];
    int edits = 1 + static_cast<int>(random() % 6);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      std::size_t at = random() % s.size();
      switch (random() % 4) {
        case 0:
          s.erase(at, 1 + random() % 20);
          break;
        case 1: {
          const std::string& t = tokens[random() % std::size(tokens)];
          s.insert(at, t.empty() ? std::string(1, '\0') : t);
          break;
        }
        case 2:
          s[at] = static_cast<char>(random() % 256);
          break;
        default:
          s.resize(at);
          break;
      }
    }
    expect_well_formed(linter.lint_python("mutated.py", s));
  }
}

TEST(lint_robustness, random_bytes_are_refused_clearly) {
  std::mt19937 random(7);
  Linter linter;
  for (int i = 0; i < 50; ++i) {
    std::string s(1 + random() % 4096, '\0');
    for (auto& c : s) c = static_cast<char>(random() % 256);
    FileReport r = linter.lint_python("noise.py", s);
    ASSERT_TRUE(r.problem) << "random bytes were linted as Python";
    expect_well_formed(r);
  }
}

TEST(lint_robustness, pathological_shapes_end_in_findings_or_a_problem) {
  Linter linter;
  std::vector<std::string> inputs = {
      "",
      "\\",
      "'''unterminated",
      std::string(200000, '('),
      "x = " + std::string(2500, '-') + "1\n",
      "x = 1" + std::string(5000, '+') + "\n",
      std::string(100000, '\n'),
      "def f():\n" + std::string(1000, ' ') + "return 1\n",
      "a = " + std::string(1 << 20, 'a') + "\n",
      "import torch\n" +
          [] {
            std::string nested;
            std::string indent;
            for (int i = 0; i < 100; ++i) {
              nested += indent + "for x in loader:\n";
              indent += " ";
            }
            return nested + indent + "total += model(x)\n";
          }(),
  };
  for (const std::string& input : inputs) {
    auto start = std::chrono::steady_clock::now();
    FileReport r = linter.lint_python("shape.py", input);
    expect_well_formed(r);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  }
}

TEST(lint_robustness, notebooks_with_wrong_shapes_are_problems) {
  Linter linter;
  for (const char* nb : {"", "[]", "{\"cells\": 3}", "{\"cells\": [{\"cell_type\": \"code\"}]}",
                         "{\"cells\": [{\"cell_type\": \"code\", \"source\": [1, 2]}]}",
                         "{\"cells\": [{\"cell_type\": \"code\", \"source\": \"a\\u0000b\"}]}"}) {
    FileReport r = linter.lint_notebook("bad.ipynb", nb);
    EXPECT_TRUE(r.problem) << nb;
    expect_well_formed(r);
  }
}

}  // namespace
}  // namespace gpuleak::lint
