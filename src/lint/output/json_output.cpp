// Machine output; the fields are documented in docs/lint.md.
#include <map>
#include <nlohmann/json.hpp>

#include "lint/output/lint_output.h"

namespace gpuleak::lint {
namespace {

using nlohmann::json;

json cell_or_null(std::uint32_t cell) { return cell > 0 ? json(cell) : json(nullptr); }

}  // namespace

void write_json(std::ostream& out, const LintRun& run, std::string_view tool_version) {
  json findings = json::array();
  json not_linted = json::array();
  json partially = json::array();
  std::map<std::string, std::size_t> by_rule;
  std::map<std::string, std::size_t> by_severity{{"error", 0}, {"warning", 0}, {"info", 0}};
  std::size_t suppressed = 0;
  std::size_t files_with_findings = 0;
  for (const FileReport& report : run.reports) {
    suppressed += report.suppressed;
    if (!report.findings.empty()) ++files_with_findings;
    if (report.problem) {
      not_linted.push_back(
          {{"path", report.path},
           {"cell", cell_or_null(report.problem->cell)},
           {"line", report.problem->position.line > 0 ? json(report.problem->position.line)
                                                      : json(nullptr)},
           {"column", report.problem->position.line > 0 ? json(report.problem->position.column)
                                                        : json(nullptr)},
           {"message", report.problem->message}});
    }
    for (const FileProblem& u : report.unparsed) {
      partially.push_back({{"path", report.path},
                           {"cell", cell_or_null(u.cell)},
                           {"line", u.position.line},
                           {"column", u.position.column},
                           {"message", u.message}});
    }
    for (const Finding& f : report.findings) {
      ++by_rule[std::string(f.rule->id)];
      ++by_severity[std::string(severity_name(f.severity))];
      json frame = json::array();
      for (const auto& line : f.frame) frame.push_back({{"line", line.line}, {"text", line.text}});
      findings.push_back({{"rule", f.rule->id},
                          {"name", f.rule->name},
                          {"severity", severity_name(f.severity)},
                          {"cause", cause_slug(f.rule->cause)},
                          {"path", report.path},
                          {"cell", cell_or_null(f.cell)},
                          {"line", f.start.line},
                          {"column", f.start.column},
                          {"end_line", f.end.line},
                          {"end_column", f.end.column},
                          {"message", f.message},
                          {"why", f.why},
                          {"fix", f.fix},
                          {"frame", frame}});
    }
  }
  json doc = {
      {"schema_version", 1},
      {"tool", {{"name", "gpuleak"}, {"version", tool_version}}},
      {"findings", findings},
      {"files_not_linted", not_linted},
      {"statements_not_parsed", partially},
      {"missing_paths", run.missing},
      {"folders_not_listed", run.problems},
      {"summary",
       {{"files", run.reports.size()},
        {"bytes", run.bytes},
        {"seconds", run.seconds},
        {"findings", run.finding_count()},
        {"files_with_findings", files_with_findings},
        {"suppressed", suppressed},
        {"by_severity", by_severity},
        {"by_rule", by_rule}}},
  };
  out << doc.dump(2) << '\n';
}

void write_rules_json(std::ostream& out) {
  json rules = json::array();
  for (const RuleInfo* r : rule_catalog()) {
    rules.push_back({{"id", r->id},
                     {"name", r->name},
                     {"severity", severity_name(r->severity)},
                     {"cause", cause_slug(r->cause)},
                     {"summary", r->summary},
                     {"why", r->why},
                     {"fix", r->fix}});
  }
  out << rules.dump(2) << '\n';
}

}  // namespace gpuleak::lint
