// The labelled corpus (tests/lint/corpus/<rule>/pos_*.py and neg_*.py, plus
// notebooks): every `# expect: GL101` line must be reported by that rule and
// nothing else may be reported. Prints precision and recall per rule and
// writes the table to <build>/lint-corpus-scores.txt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "lint/lint.h"
#include "lint/syntax_tree.h"

namespace gpuleak::lint {
namespace {

namespace fs = std::filesystem;

struct Label {
  std::string rule;
  std::uint32_t cell;
  std::uint32_t line;
  auto operator<=>(const Label&) const = default;
};

void labels_in_text(const std::string& text, std::uint32_t cell, std::set<Label>& out) {
  std::istringstream in(text);
  std::string line;
  std::uint32_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::size_t at = line.find("# expect: ");
    if (at == std::string::npos) continue;
    std::string ids = line.substr(at + 10);
    std::size_t start = 0;
    while (start < ids.size()) {
      std::size_t comma = ids.find(',', start);
      std::string id =
          ids.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      id.erase(0, id.find_first_not_of(' '));
      id.erase(id.find_last_not_of(" \r") + 1);
      if (!id.empty()) out.insert({id, cell, number});
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
}

std::set<Label> expected_labels(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::set<Label> out;
  if (file.extension() == ".ipynb") {
    auto nb = nlohmann::json::parse(buffer.str());
    std::uint32_t cell = 0;
    for (const auto& c : nb["cells"]) {
      ++cell;
      if (c["cell_type"] != "code") continue;
      std::string source;
      if (c["source"].is_string()) {
        source = c["source"];
      } else {
        for (const auto& part : c["source"]) source += part.get<std::string>();
      }
      labels_in_text(source, cell, out);
    }
  } else {
    labels_in_text(buffer.str(), 0, out);
  }
  return out;
}

struct Score {
  int true_positives = 0;
  int false_positives = 0;
  int false_negatives = 0;
  int positive_files = 0;
  int negative_files = 0;
};

std::string ratio(int num, int den) {
  if (den == 0) return "-";
  std::ostringstream s;
  s.precision(3);
  s << std::fixed << static_cast<double>(num) / den;
  return s.str();
}

TEST(lint_corpus, every_labelled_finding_is_found_and_nothing_else) {
  fs::path root = fs::path(GPULEAK_SOURCE_DIR) / "tests" / "lint" / "corpus";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() &&
        (e.path().extension() == ".py" || e.path().extension() == ".ipynb")) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 100u);

  std::map<std::string, Score> scores;
  for (const RuleInfo* r : rule_catalog()) scores[std::string(r->id)];
  Linter linter;
  std::vector<std::string> failures;
  for (const fs::path& file : files) {
    std::string name = file.filename().string();
    std::string folder = file.parent_path().filename().string();
    std::set<Label> expected = expected_labels(file);
    bool negative = name.rfind("neg_", 0) == 0;
    EXPECT_TRUE(negative || name.rfind("pos_", 0) == 0) << file << ": name it pos_ or neg_";
    if (negative) {
      EXPECT_TRUE(expected.empty()) << file << ": a negative file has no expectations";
    } else {
      EXPECT_FALSE(expected.empty()) << file << ": a positive file needs `# expect:` lines";
    }
    if (scores.count(folder)) {
      (negative ? scores[folder].negative_files : scores[folder].positive_files)++;
    }
    FileReport report = linter.lint_file(file);
    EXPECT_FALSE(report.problem) << file << ": " << report.problem->message;
    std::set<Label> found;
    for (const Finding& f : report.findings)
      found.insert({std::string(f.rule->id), f.cell, f.start.line});
    for (const Label& l : expected) {
      bool hit = found.count(l) != 0;
      auto& s = scores[l.rule];
      (hit ? s.true_positives : s.false_negatives)++;
      if (!hit) {
        failures.push_back("missed " + l.rule + " at " + file.string() + ":" +
                           (l.cell ? "cell " + std::to_string(l.cell) + ":" : "") +
                           std::to_string(l.line));
      }
    }
    for (const Label& l : found) {
      if (expected.count(l)) continue;
      scores[l.rule].false_positives++;
      failures.push_back("unexpected " + l.rule + " at " + file.string() + ":" +
                         (l.cell ? "cell " + std::to_string(l.cell) + ":" : "") +
                         std::to_string(l.line));
    }
  }

  std::ostringstream table;
  table << "rule    positives  negatives  TP  FP  FN  precision  recall\n";
  for (const auto& [rule, s] : scores) {
    char line[160];
    std::snprintf(line, sizeof line, "%-6s  %9d  %9d  %2d  %2d  %2d  %9s  %6s\n", rule.c_str(),
                  s.positive_files, s.negative_files, s.true_positives, s.false_positives,
                  s.false_negatives,
                  ratio(s.true_positives, s.true_positives + s.false_positives).c_str(),
                  ratio(s.true_positives, s.true_positives + s.false_negatives).c_str());
    table << line;
  }
  std::cout << table.str();
  std::ofstream(fs::path(GPULEAK_BINARY_DIR) / "lint-corpus-scores.txt") << table.str();

  for (const auto& f : failures) ADD_FAILURE() << f;
  for (const auto& [rule, s] : scores) {
    EXPECT_GE(s.positive_files, 3) << rule << " needs at least 3 positive files";
    EXPECT_GE(s.negative_files, 3) << rule << " needs at least 3 tricky negative files";
    EXPECT_GE(s.true_positives, 3) << rule;
  }
}

}  // namespace
}  // namespace gpuleak::lint

namespace gpuleak::lint {
namespace {

// What a fix text quotes between backticks is code to type: it parses as
// Python (a clause header gets a body, a decorator a function) and is never
// a cut expression. Checked on every finding of both corpora.
TEST(lint_corpus, every_fix_quotes_whole_valid_python) {
  PythonParser parser;
  Linter linter;
  std::size_t spans = 0;
  for (const char* folder : {"corpus", "reported"}) {
    fs::path root = fs::path(GPULEAK_SOURCE_DIR) / "tests" / "lint" / folder;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (!e.is_regular_file() || e.path().extension() != ".py") continue;
      FileReport report = linter.lint_file(e.path());
      for (const Finding& f : report.findings) {
        std::size_t at = 0;
        while ((at = f.fix.find('`', at)) != std::string::npos) {
          std::size_t end = f.fix.find('`', at + 1);
          ASSERT_NE(end, std::string::npos) << f.fix;
          std::string code = f.fix.substr(at + 1, end - at - 1);
          at = end + 1;
          ++spans;
          // Keywords and `.method()` references are words in a sentence.
          if (code == "with" || code == "try" || code == "try:" || code == "finally:" ||
              code == "except:" || code == "else:" || code == "del") {
            continue;
          }
          // Shell, not Python: `gpuleak run`, `PYTORCH_CUDA_ALLOC_CONF=...`.
          std::size_t eq = code.find('=');
          bool env =
              eq != std::string::npos && eq > 0 &&
              std::all_of(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(eq), [](char c) {
                return std::isupper(static_cast<unsigned char>(c)) || c == '_';
              });
          if (code.rfind("gpuleak ", 0) == 0 || env) continue;
          std::string program = code;
          if (!program.empty() && program.front() == '.') program = "x" + program;
          if (program == "finally:") continue;
          if (!program.empty() && program.back() == ':') program += "\n    pass";
          if (!program.empty() && program.front() == '@') program += "\ndef f():\n    pass";
          ParseResult r = parser.parse(program + "\n");
          ASSERT_TRUE(r.tree) << code;
          EXPECT_FALSE(r.tree->has_error())
              << e.path().filename() << " " << f.rule->id << ": `" << code << "` in: " << f.fix;
        }
      }
    }
  }
  EXPECT_GT(spans, 100u);
}

}  // namespace
}  // namespace gpuleak::lint
