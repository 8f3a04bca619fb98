// GitHub Actions workflow commands: one `::error` / `::warning` / `::notice`
// line per finding, which GitHub turns into annotations on the changed lines
// (https://docs.github.com/actions/using-workflows/workflow-commands-for-github-actions).
#include <fmt/format.h>

#include "lint/output/lint_output.h"
#include "lint/output/percent_encoding.h"

namespace gpuleak::lint {
namespace {

// The message part: '%', CR and LF are encoded.
std::string escape_data(std::string_view s) {
  return percent_encode(s, [](unsigned char c) { return c != '%' && c != '\r' && c != '\n'; });
}

// A property value (file=, title=): also ':' and ','.
std::string escape_property(std::string_view s) {
  return percent_encode(s, [](unsigned char c) {
    return c != '%' && c != '\r' && c != '\n' && c != ':' && c != ',';
  });
}

// The command is the severity's name, but for info, which GitHub calls a notice.
std::string_view command(Severity s) { return s == Severity::kInfo ? "notice" : severity_name(s); }

}  // namespace

void write_github(std::ostream& out, const LintRun& run) {
  for (const FileReport& report : run.reports) {
    if (report.problem) {
      std::string where = report.problem->position.line > 0
                              ? fmt::format(",line={},col={}", report.problem->position.line,
                                            report.problem->position.column)
                              : std::string();
      out << fmt::format("::error file={}{},title=gpuleak lint::{}\n", escape_property(report.path),
                         where, escape_data("not linted: " + report.problem->message));
    }
    for (const FileProblem& u : report.unparsed) {
      out << fmt::format("::warning file={},line={},col={},title=gpuleak lint::{}\n",
                         escape_property(report.path), u.position.line, u.position.column,
                         escape_data(u.message));
    }
    for (const Finding& f : report.findings) {
      // Notebook findings have lines within a cell; the file is the notebook.
      std::string cell = f.cell > 0 ? fmt::format(" (cell {})", f.cell) : std::string();
      out << fmt::format("::{} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
                         command(f.severity), escape_property(report.path), f.start.line,
                         f.start.column, f.end.line, std::max(f.end.column, 1u),
                         escape_property(fmt::format("{} {}", f.rule->id, f.rule->name)),
                         escape_data(fmt::format("{}{}. Fix: {}", f.message, cell, f.fix)));
    }
  }
  for (const std::string& problem : run.problems) {
    out << fmt::format("::error title=gpuleak lint::{}\n", escape_data(problem));
  }
}

}  // namespace gpuleak::lint
