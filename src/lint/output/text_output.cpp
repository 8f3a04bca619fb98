// Human output: one block per finding with a code frame, then a summary.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "lint/output/lint_output.h"

namespace gpuleak::lint {
namespace {

struct Palette {
  bool on;
  std::string wrap(std::string_view code, std::string_view text) const {
    if (!on) return std::string(text);
    return fmt::format("\033[{}m{}\033[0m", code, text);
  }
  std::string bold(std::string_view t) const { return wrap("1", t); }
  std::string dim(std::string_view t) const { return wrap("2", t); }
  std::string severity(Severity s, std::string_view t) const {
    switch (s) {
      case Severity::kError:
        return wrap("1;31", t);
      case Severity::kWarning:
        return wrap("1;33", t);
      case Severity::kInfo:
        return wrap("1;34", t);
    }
    return std::string(t);
  }
};

// Wraps prose to `width` columns, every line after the first indented.
std::string wrap_prose(std::string_view text, std::size_t indent, std::size_t width) {
  std::string out;
  std::size_t column = indent;
  std::size_t i = 0;
  bool first = true;
  while (i < text.size()) {
    std::size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(i, end - i);
    if (!first && column + 1 + word.size() > width) {
      out += '\n';
      out.append(indent, ' ');
      column = indent;
    } else if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    first = false;
    i = end + 1;
  }
  return out;
}

std::size_t display_width(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

void write_frame(std::ostream& out, const Finding& f, const Palette& p) {
  if (f.frame.empty()) return;
  std::uint32_t widest = 0;
  for (const auto& line : f.frame) widest = std::max(widest, line.line);
  std::size_t number_width = std::to_string(widest).size();
  for (const auto& line : f.frame) {
    bool flagged = line.line >= f.start.line && line.line <= f.end.line;
    std::string text = line.text;
    // Tabs would break the caret alignment.
    for (auto& c : text) {
      if (c == '\t') c = ' ';
    }
    out << (flagged ? p.severity(f.severity, "  > ") : std::string("    "))
        << p.dim(fmt::format("{:>{}} | ", line.line, number_width)) << text << '\n';
    if (flagged && f.start.line == f.end.line && line.line == f.start.line) {
      std::size_t from = f.start.column > 0 ? f.start.column - 1 : 0;
      std::size_t to = f.end.column > f.start.column ? f.end.column - 1 : from + 1;
      to = std::min(to, std::max(from + 1, display_width(text)));
      out << "    " << std::string(number_width, ' ') << p.dim(" | ") << std::string(from, ' ')
          << p.severity(f.severity, std::string(to - from, '^')) << '\n';
    }
  }
}

}  // namespace

std::string format_location(const std::string& path, std::uint32_t cell, const Position& p) {
  if (cell > 0) return fmt::format("{}:cell {}:{}:{}", path, cell, p.line, p.column);
  return fmt::format("{}:{}:{}", path, p.line, p.column);
}

void write_rules_text(std::ostream& out) {
  for (const RuleInfo* r : rule_catalog()) {
    out << fmt::format("{}  {:<7}  {:<32} {}\n", r->id, severity_name(r->severity), r->name,
                       cause_title(r->cause))
        << "       " << wrap_prose(r->summary, 7, 100) << "\n";
  }
}

std::size_t LintRun::finding_count() const {
  std::size_t n = 0;
  for (const auto& r : reports) n += r.findings.size();
  return n;
}

std::size_t LintRun::files_not_linted() const {
  std::size_t n = 0;
  for (const auto& r : reports) n += r.problem.has_value();
  return n;
}

std::size_t LintRun::unparsed_statements() const {
  std::size_t n = 0;
  for (const auto& r : reports) n += r.unparsed.size();
  return n;
}

void write_statistics(std::ostream& out, const LintRun& run) {
  std::map<const RuleInfo*, std::size_t> counts;
  for (const FileReport& report : run.reports) {
    for (const Finding& f : report.findings) ++counts[f.rule];
  }
  std::vector<std::pair<const RuleInfo*, std::size_t>> rows(counts.begin(), counts.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first->id < b.first->id;
  });
  std::size_t width = 1;
  for (const auto& [rule, n] : rows) width = std::max(width, std::to_string(n).size());
  for (const auto& [rule, n] : rows) {
    out << fmt::format("{:>{}}  {}  {:<7}  {}\n", n, width, rule->id, severity_name(rule->severity),
                       rule->name);
  }
}

void write_text(std::ostream& out, const LintRun& run, bool color) {
  Palette p{color};
  std::map<Severity, std::size_t> by_severity;
  std::size_t files_with_findings = 0;
  std::size_t suppressed = 0;
  // The mechanism is explained once per rule; later findings point back.
  std::vector<const RuleInfo*> explained;
  for (const FileReport& report : run.reports) {
    suppressed += report.suppressed;
    if (!report.findings.empty()) ++files_with_findings;
    for (const Finding& f : report.findings) {
      ++by_severity[f.severity];
      out << p.bold(format_location(report.path, f.cell, f.start)) << ": "
          << p.severity(f.severity, severity_name(f.severity)) << ' ' << p.bold(f.rule->id) << ' '
          << p.dim(f.rule->name) << '\n';
      out << "  " << wrap_prose(f.message, 2, 100) << '\n';
      write_frame(out, f, p);
      out << "  " << p.bold("cause:") << ' ' << cause_title(f.rule->cause) << '\n';
      bool first = std::find(explained.begin(), explained.end(), f.rule) == explained.end();
      if (first) {
        explained.push_back(f.rule);
        out << "  " << p.bold("why:") << "   " << wrap_prose(f.why, 9, 100) << '\n';
      } else {
        out << "  " << p.bold("why:") << "   as for the first " << f.rule->id << " finding above\n";
      }
      out << "  " << p.bold("fix:") << "   " << wrap_prose(f.fix, 9, 100) << "\n\n";
    }
  }
  std::size_t total = run.finding_count();
  std::size_t files = run.reports.size();
  std::string summary;
  if (total == 0) {
    summary = fmt::format("No findings in {} file{}", files, files == 1 ? "" : "s");
  } else {
    std::vector<std::string> parts;
    for (Severity s : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
      if (by_severity[s] > 0) {
        parts.push_back(fmt::format("{} {}{}", by_severity[s], severity_name(s),
                                    by_severity[s] == 1 ? "" : "s"));
      }
    }
    summary =
        fmt::format("Found {} finding{} ({}) in {} of {} file{}", total, total == 1 ? "" : "s",
                    fmt::join(parts, ", "), files_with_findings, files, files == 1 ? "" : "s");
  }
  if (suppressed > 0) summary += fmt::format("; {} suppressed inline", suppressed);
  std::size_t not_linted = run.files_not_linted();
  if (not_linted > 0) {
    summary +=
        fmt::format("; {} file{} could not be linted", not_linted, not_linted == 1 ? "" : "s");
  }
  std::size_t unparsed = run.unparsed_statements();
  if (unparsed > 0) {
    summary += fmt::format("; {} statement{} could not be parsed and {} not analysed", unparsed,
                           unparsed == 1 ? "" : "s", unparsed == 1 ? "was" : "were");
  }
  if (!run.problems.empty()) {
    summary += fmt::format("; {} folder{} could not be listed", run.problems.size(),
                           run.problems.size() == 1 ? "" : "s");
  }
  out << p.bold(summary) << ".\n";
}

}  // namespace gpuleak::lint
