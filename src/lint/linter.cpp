// Lints one file: decode, parse, analyse, run the selected rules, apply
// inline suppressions, and turn rule reports into positioned findings.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
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

// tree-sitter-python 0.23 rejects a starred list or tuple in a bare
// expression list (`host, *rest = endpoint, *[]`, `a = b, *(c, d)`), not a
// starred name or call. The bracketed operand becomes a name of the same
// length (`*__`): every offset stays, and only that operand is not analysed.
//
// It also rejects unparenthesized starred elements after `return` and
// `yield` (`return *[None] * 3, *grads`, valid since Python 3.8). Those stars
// become spaces: the elements stay (a tuple of the iterables instead of their
// items, which carries the same values for the analysis) and so do the offsets.
bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

void unstar_returned_elements(std::string& out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    // A `return` or `yield` that starts a statement (after indentation).
    if (i > 0 && out[i - 1] != '\n') continue;
    while (i < out.size() && (out[i] == ' ' || out[i] == '\t')) ++i;
    std::size_t word = i;
    while (i < out.size() && is_word_char(out[i])) ++i;
    std::string_view keyword(out.data() + word, i - word);
    if (keyword != "return" && keyword != "yield") {
      while (i < out.size() && out[i] != '\n') ++i;
      continue;
    }
    int depth = 0;
    char quote = 0;
    bool element_start = true;  // after the keyword or a top-level comma
    for (; i < out.size() && out[i] != '\n'; ++i) {
      char c = out[i];
      if (quote != 0) {
        if (c == '\\') {
          ++i;
        } else if (c == quote) {
          quote = 0;
        }
        continue;
      }
      if (c == '#') break;
      if (c == '\'' || c == '"') {
        quote = c;
        element_start = false;
        continue;
      }
      if (c == ' ' || c == '\t') continue;
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (depth == 0 && c == '*' && element_start && i + 1 < out.size() && out[i + 1] != '*') {
        out[i] = ' ';
        continue;
      }
      element_start = depth == 0 && c == ',';
    }
    if (i < out.size() && out[i] != '\n') {
      while (i < out.size() && out[i] != '\n') ++i;
    }
  }
}

std::string starred_brackets_as_names(std::string_view code) {
  std::string out(code);
  unstar_returned_elements(out);
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] != '*' || (out[i + 1] != '[' && out[i + 1] != '(')) continue;
    std::size_t before = i;
    while (before > 0 && (out[before - 1] == ' ' || out[before - 1] == '\t')) --before;
    if (before == 0 || (out[before - 1] != ',' && out[before - 1] != '=')) continue;
    char open = out[i + 1];
    char close = open == '[' ? ']' : ')';
    std::size_t depth = 0;
    for (std::size_t j = i + 1; j < out.size() && out[j] != '\n'; ++j) {
      if (out[j] == open) ++depth;
      if (out[j] == close && --depth == 0) {
        std::fill(out.begin() + static_cast<std::ptrdiff_t>(i + 1),
                  out.begin() + static_cast<std::ptrdiff_t>(j + 1), '_');
        break;
      }
    }
  }
  return out;
}

// The statements (children of a block or the module) that contain a parse
// error, outermost first; the root itself when the error is not inside any.
std::vector<NodeId> unparsed_statements(const SyntaxTree& tree) {
  std::vector<NodeId> out;
  if (!tree.has_error()) return out;
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (!tree.node(id).error) continue;
    NodeId statement = id;
    for (NodeId p = tree.parent(id); p != kNoNode; statement = p, p = tree.parent(p)) {
      NodeKind k = tree.kind(p);
      if (k == NodeKind::kBlock || k == NodeKind::kModule) break;
    }
    if (tree.parent(statement) == kNoNode) statement = tree.root();
    if (!out.empty() && tree.contains(out.back(), statement)) continue;
    out.push_back(statement);
    id = tree.node(statement).subtree_end - 1;  // skip the rest of it
  }
  if (tree.first_error() == tree.root() && out.empty()) out.push_back(tree.root());
  return out;
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
  // Sized once from the file's length: a doubling string holds up to twice
  // the file at its peak.
  std::uintmax_t expected_bytes = std::filesystem::file_size(path, ec);
  if (!ec && expected_bytes <= kMaxFileBytes) bytes.reserve(expected_bytes + 1);
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
  if (std::optional<std::string_view> text = python_source_in_place(bytes)) {
    state_->lint_text(report, *text, *text, {});
    return report;
  }
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
  std::vector<SourceMap::CellSpan> map_cells = cells;
  map.set_cells(std::move(cells));
  ParseResult parsed = parser.parse(code);
  if (!parsed.tree) {
    report.problem = FileProblem{parsed.failure, {}, 0};
    return;
  }
  // tree-sitter-python rejects a few valid constructs; see
  // starred_brackets_as_names.
  std::string rewritten;
  if (parsed.tree->has_error()) {
    rewritten = starred_brackets_as_names(code);
    if (rewritten != code) {
      // The rewritten text has the same offsets and errors at most where the
      // original had them: its tree replaces the first one, which is dropped
      // before the parse so that two trees of a large file never coexist.
      parsed = ParseResult{};
      parsed = parser.parse(rewritten);
      if (!parsed.tree) {
        report.problem = FileProblem{parsed.failure, {}, 0};
        return;
      }
    }
  }
  // A notebook cell is run on its own: an unclosed bracket in one must not
  // swallow the cells after it. Blank such a cell (spaces, same lines) and
  // parse again, a few times at most.
  std::vector<FileProblem> blanked_cells;
  std::string blanked;  // outlives the tree parsed from it
  std::uint64_t blanked_bytes = 0;
  if (parsed.tree->has_error() && !map_cells.empty()) {
    blanked = rewritten.empty() ? std::string(code) : rewritten;
    for (int attempt = 0; attempt < 8 && parsed.tree->has_error(); ++attempt) {
      NodeId error = parsed.tree->first_error();
      TextPoint at = parsed.tree->start_point(error);
      std::uint32_t cell = map.cell_of_row(at.row);
      std::uint32_t from = 0, to = static_cast<std::uint32_t>(blanked.size());
      for (std::size_t c = 0; c < map_cells.size(); ++c) {
        if (map_cells[c].cell != cell) continue;
        from = map.line_start(map_cells[c].first_line);
        if (c + 1 < map_cells.size()) to = map.line_start(map_cells[c + 1].first_line);
      }
      if (cell == 0 || from >= to) break;
      blanked_cells.push_back(FileProblem{
          fmt::format("cannot parse this cell as Python 3 ({}); it is not analysed, the other "
                      "cells are",
                      describe_syntax_error(*parsed.tree, error)),
          map.position(at.row, at.column_bytes), cell});
      for (std::uint32_t i = from; i < to; ++i) {
        if (blanked[i] != '\n') blanked[i] = ' ';
      }
      blanked_bytes += to - from;
      if (blanked_bytes * 2 > code.size()) {
        report.problem = FileProblem{
            fmt::format("cannot parse as Python 3: {}", describe_syntax_error(*parsed.tree, error)),
            map.position(at.row, at.column_bytes), cell};
        return;
      }
      ParseResult again = parser.parse(blanked);
      if (!again.tree) break;
      parsed = std::move(again);
    }
    report.unparsed = blanked_cells;
  }
  const SyntaxTree& tree = *parsed.tree;
  // Statements that still do not parse are left out of the analysis and
  // reported; the rest of the file is linted. A file that is mostly errors
  // is not linted at all.
  std::vector<NodeId> unparsed = unparsed_statements(tree);
  if (!unparsed.empty()) {
    std::uint64_t broken_bytes = 0;
    for (NodeId st : unparsed) broken_bytes += tree.node(st).end_byte - tree.node(st).start_byte;
    NodeId error = tree.first_error();
    TextPoint at = tree.start_point(error);
    std::string why = describe_syntax_error(tree, error);
    if (broken_bytes * 2 > code.size() || unparsed.front() == tree.root()) {
      report.problem = FileProblem{fmt::format("cannot parse as Python 3: {}", why),
                                   map.position(at.row, at.column_bytes), map.cell_of_row(at.row)};
      return;
    }
    for (NodeId st : unparsed) {
      NodeId first = st;
      for (NodeId id = st; id < tree.node(st).subtree_end; ++id) {
        if (tree.node(id).error) {
          first = id;
          break;
        }
      }
      TextPoint p = tree.start_point(first);
      report.unparsed.push_back(FileProblem{
          fmt::format("cannot parse this statement as Python 3 ({}); it is not analysed, the "
                      "rest of the file is",
                      describe_syntax_error(tree, first)),
          map.position(p.row, p.column_bytes), map.cell_of_row(p.row)});
    }
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
    bool in_unparsed = false;
    for (NodeId st : unparsed)
      in_unparsed |= tree.contains(st, r.node) || tree.contains(r.node, st);
    if (in_unparsed) continue;
    TextPoint start = tree.start_point(r.node);
    TextPoint end = tree.end_point(r.node);
    if (suppressions.suppresses(*rule, start.row, end.row)) {
      ++report.suppressed;
      continue;
    }
    Finding f;
    f.rule = rule;
    f.severity = r.severity.value_or(rule->severity);
    f.message = std::move(r.message);
    f.why = r.why.empty() ? std::string(rule->why) : std::move(r.why);
    f.fix = r.fix.empty() ? std::string(rule->fix) : std::move(r.fix);
    f.start = map.position(start.row, start.column_bytes);
    f.end = map.position(end.row, end.column_bytes);
    f.cell = map.cell_of_row(start.row);
    if (map.cell_of_row(end.row) != f.cell) f.end = f.start;
    f.frame = code_frame(map, start.row, end.row);
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
