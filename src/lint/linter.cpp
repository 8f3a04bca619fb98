// Lints one file: decode, parse, analyse, run the selected rules, apply
// inline suppressions, and turn rule reports into positioned findings.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "file_analysis.h"
#include "lint.h"
#include "notebook.h"
#include "rule.h"
#include "source_text.h"
#include "suppression.h"
#include "syntax_tree.h"

namespace gpuleak::lint {
namespace {

// Files larger than this are refused: Python modules this size are
// generated data, and the analysis keeps a few bytes per byte of source.
constexpr std::uint64_t kMaxFileBytes = 64ull << 20;

class CollectingSink final : public FindingSink {
 public:
  void report(const RuleInfo& rule, RuleReport report) override {
    reports.emplace_back(&rule, std::move(report));
  }
  std::vector<std::pair<const RuleInfo*, RuleReport>> reports;
};

// "invalid syntax near `)`" or "missing `:`".
std::string describe_syntax_error(const SyntaxTree& tree, NodeId error) {
  const SyntaxNode& n = tree.node(error);
  if (n.kind != NodeKind::kError && n.start_byte == n.end_byte) {
    return fmt::format("missing `{}`", tree.type_name(error));
  }
  std::string near;
  for (char c : tree.text(error)) {
    if (c == '\n' || c == '\r') break;
    near += c;
    if (near.size() >= 30) {
      near += "...";
      break;
    }
  }
  while (!near.empty() && (near.back() == ' ' || near.back() == '\t')) near.pop_back();
  if (near.empty()) return "invalid syntax";
  return fmt::format("invalid syntax near `{}`", near);
}

}  // namespace

struct Linter::State {
  LintOptions options;
  PythonParser parser;

  void lint_text(FileReport& report, std::string_view code, std::string_view display,
                 std::vector<SourceMap::CellSpan> cells);
};

Linter::Linter(LintOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
}

Linter::~Linter() = default;

FileReport Linter::lint_file(const std::filesystem::path& path) {
  FileReport report;
  report.path = path.string();
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec) {
    report.problem = FileProblem{fmt::format("cannot read: {}", ec.message()), {}, 0};
    return report;
  }
  if (std::filesystem::is_directory(status)) {
    report.problem = FileProblem{"is a directory", {}, 0};
    return report;
  }
  if (!std::filesystem::is_regular_file(status)) {
    // A FIFO would block the read forever; a device never ends.
    report.problem = FileProblem{"not a regular file (a pipe, socket or device)", {}, 0};
    return report;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    report.problem = FileProblem{fmt::format("cannot read: {}", std::strerror(errno)), {}, 0};
    return report;
  }
  std::string bytes;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    bytes.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > kMaxFileBytes) {
      report.problem =
          FileProblem{fmt::format("larger than {} MiB; not linted", kMaxFileBytes >> 20), {}, 0};
      return report;
    }
  }
  if (in.bad()) {
    report.problem = FileProblem{fmt::format("cannot read: {}", std::strerror(errno)), {}, 0};
    return report;
  }
  if (path.extension() == ".ipynb") return lint_notebook(report.path, bytes);
  return lint_python(report.path, bytes);
}

FileReport Linter::lint_python(std::string path, std::string_view bytes) {
  FileReport report;
  report.path = std::move(path);
  report.bytes = bytes.size();
  DecodedSource decoded = decode_python_source(bytes);
  if (!decoded.problem.empty()) {
    report.problem = FileProblem{decoded.problem, {}, 0};
    return report;
  }
  state_->lint_text(report, decoded.text, decoded.text, {});
  return report;
}

FileReport Linter::lint_notebook(std::string path, std::string_view json_bytes) {
  FileReport report;
  report.path = std::move(path);
  report.bytes = json_bytes.size();
  NotebookCode notebook = extract_notebook_code(json_bytes);
  if (notebook.problem.empty() && notebook.code.find('\0') != std::string::npos) {
    notebook.problem = "a code cell contains a NUL character";
  }
  if (!notebook.problem.empty()) {
    report.problem = FileProblem{notebook.problem, {}, 0};
    return report;
  }
  state_->lint_text(report, notebook.code, notebook.display, std::move(notebook.cells));
  return report;
}

void Linter::State::lint_text(FileReport& report, std::string_view code, std::string_view display,
                              std::vector<SourceMap::CellSpan> cells) {
  SourceMap map(code, display);
  map.set_cells(std::move(cells));
  ParseResult parsed = parser.parse(code);
  if (!parsed.tree) {
    report.problem = FileProblem{parsed.failure, {}, 0};
    return;
  }
  const SyntaxTree& tree = *parsed.tree;
  if (tree.has_error()) {
    NodeId error = tree.first_error();
    const SyntaxNode& n = tree.node(error);
    report.problem =
        FileProblem{fmt::format("cannot parse as Python 3: {}", describe_syntax_error(tree, error)),
                    map.position(n.start_row, n.start_column_bytes), map.cell_of_row(n.start_row)};
    return;
  }
  CollectingSink sink;
  const Rule* current = nullptr;
  try {
    FileAnalysis analysis(tree);
    if (!analysis.uses_torch()) return;
    for (const auto& rule : all_rules()) {
      if (!options.selection.enabled(rule->info())) continue;
      current = rule.get();
      rule->check(analysis, sink);
    }
  } catch (const std::exception& e) {
    // A bug in gpuleak must not take the other files down with it.
    report.problem = FileProblem{
        fmt::format("internal error while analysing{}: {}",
                    current ? fmt::format(" ({})", current->info().id) : std::string(), e.what()),
        {},
        0};
    return;
  }
  Suppressions suppressions(tree);
  for (auto& [rule, r] : sink.reports) {
    if (r.node == kNoNode) continue;
    const SyntaxNode& n = tree.node(r.node);
    if (suppressions.suppresses(*rule, n.start_row, n.end_row)) {
      ++report.suppressed;
      continue;
    }
    Finding f;
    f.rule = rule;
    f.severity = r.severity.value_or(rule->severity);
    f.message = std::move(r.message);
    f.why = r.why.empty() ? std::string(rule->why) : std::move(r.why);
    f.fix = r.fix.empty() ? std::string(rule->fix) : std::move(r.fix);
    f.start = map.position(n.start_row, n.start_column_bytes);
    f.end = map.position(n.end_row, n.end_column_bytes);
    f.cell = map.cell_of_row(n.start_row);
    if (map.cell_of_row(n.end_row) != f.cell) f.end = f.start;
    f.frame = code_frame(map, n.start_row, n.end_row);
    report.findings.push_back(std::move(f));
  }
  std::sort(report.findings.begin(), report.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.cell != b.cell) return a.cell < b.cell;
    if (a.start.line != b.start.line) return a.start.line < b.start.line;
    if (a.start.column != b.start.column) return a.start.column < b.start.column;
    return a.rule->id < b.rule->id;
  });
  // One rule reporting the same spot twice (two paths to one store) is noise.
  report.findings.erase(std::unique(report.findings.begin(), report.findings.end(),
                                    [](const Finding& a, const Finding& b) {
                                      return a.rule == b.rule && a.cell == b.cell &&
                                             a.start.line == b.start.line &&
                                             a.start.column == b.start.column;
                                    }),
                        report.findings.end());
}

}  // namespace gpuleak::lint
