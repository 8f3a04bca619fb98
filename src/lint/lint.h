// gpuleak lint: finds GPU-memory leak patterns in PyTorch source before it
// runs, with stable rule ids, explanations and fixes.
//
// Contract:
// - A Linter lints one file at a time and is not thread-safe; make one per
//   thread (it owns a tree-sitter parser). Rule metadata (rule_catalog) is
//   immutable and shared.
// - lint_* never throws for bad input: a file that cannot be read, is binary,
//   is not UTF-8 or does not parse at all yields a FileReport whose `problem`
//   says why and whose findings are empty. Statements that do not parse in
//   a file that otherwise does are listed in `unparsed` and left out of the
//   analysis; the rest of the file is linted.
// - Findings are sorted by position and already filtered by the selection
//   and by inline `# gpuleak: ignore[ID]` comments.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuleak::lint {

enum class Severity { kError, kWarning, kInfo };

// Why memory is held (or why the pattern is wrong), after design.md's causes.
enum class Cause {
  kAutogradGraphKept,   // a tensor with grad_fn keeps every saved activation of its step
  kTensorsKeptAlive,    // a live reference keeps CUDA tensors
  kWorkersWithCuda,     // DataLoader workers each create a CUDA context
  kContextsLeftBehind,  // processes holding a context outlive their job
  kIneffectiveFix,      // folklore that frees nothing leaked
  kRaisesAtRuntime,     // folklore that does not even run
  kCorrectness,         // a correctness bug, not a leak
};

std::string_view severity_name(Severity severity);  // "error", "warning", "info"
std::string_view cause_slug(Cause cause);           // "autograd-graph-kept-alive"
std::string_view cause_title(Cause cause);          // "autograd graph kept alive"

// What a rule is; one per file under src/lint/rules/. Ids never change meaning.
struct RuleInfo {
  std::string_view id;    // "GL101"
  std::string_view name;  // "loss-accumulated-with-graph"
  Severity severity;      // default severity of its findings
  Cause cause;
  std::string_view summary;  // one line: what the rule finds
  std::string_view why;      // the mechanism, for people
  std::string_view fix;      // the general fix
};

// Every rule, sorted by id.
const std::vector<const RuleInfo*>& rule_catalog();
// By id ("GL101", any case) or name ("loss-accumulated-with-graph"); null if none.
const RuleInfo* find_rule(std::string_view id_or_name);

// 1-based line and column; columns count Unicode code points. In a notebook
// the line is within the cell.
struct Position {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

struct FrameLine {
  std::uint32_t line = 0;  // 1-based, same numbering as Position
  std::string text;        // without the line break
};

struct Finding {
  const RuleInfo* rule = nullptr;
  Severity severity = Severity::kWarning;
  std::string message;  // what this code does, naming its variables
  std::string why;      // the mechanism behind it
  std::string fix;      // a concrete change
  Position start;
  Position end;
  std::uint32_t cell = 0;        // notebook cell (1-based, counting every cell); 0 in .py files
  std::vector<FrameLine> frame;  // the flagged lines with up to two lines of context
};

// Why a file was not linted.
struct FileProblem {
  std::string message;
  Position position;  // line 0 when there is no position
  std::uint32_t cell = 0;
};

struct FileReport {
  std::string path;
  std::uint64_t bytes = 0;
  std::vector<Finding> findings;
  std::optional<FileProblem> problem;
  // Statements left out because they do not parse; the rest was linted.
  std::vector<FileProblem> unparsed;
  std::uint32_t suppressed = 0;  // findings hidden by inline ignore comments
};

// Which rules run. Entries are ids ("GL101"), id prefixes ("GL1", "GL") or
// names. An empty `select` means every rule; `ignore` wins over `select`.
class RuleSelection {
 public:
  RuleSelection() = default;
  // Throws std::invalid_argument naming the first entry that matches no rule.
  RuleSelection(std::vector<std::string> select, std::vector<std::string> ignore);
  bool enabled(const RuleInfo& rule) const;

 private:
  std::vector<std::string> select_;
  std::vector<std::string> ignore_;
};

struct LintOptions {
  RuleSelection selection;
};

class Linter {
 public:
  explicit Linter(LintOptions options = {});
  ~Linter();
  Linter(const Linter&) = delete;
  Linter& operator=(const Linter&) = delete;

  // Reads and lints a file: `.ipynb` as a notebook, anything else as Python.
  FileReport lint_file(const std::filesystem::path& path);
  // Lints Python source held in memory; `path` is only used in the report.
  FileReport lint_python(std::string path, std::string_view bytes);
  // Lints the code cells of a notebook (nbformat 4 JSON).
  FileReport lint_notebook(std::string path, std::string_view json_bytes);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpuleak::lint
