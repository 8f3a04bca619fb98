// SARIF 2.1.0 (OASIS). One run; the rule table lists every rule so that
// results refer to it by index; files that could not be linted become
// tool execution notifications and mark the run as not successful.
#include <cctype>
#include <nlohmann/json.hpp>

#include "lint/output/lint_output.h"
#include "lint/output/percent_encoding.h"

namespace gpuleak::lint {
namespace {

using nlohmann::json;

// A relative path as a URI reference (RFC 3986): unreserved characters and
// '/' as they are, everything else percent-encoded; absolute paths get the
// file:// scheme.
std::string path_to_uri(const std::string& path) {
  std::string scheme = !path.empty() && path.front() == '/' ? "file://" : "";
  return scheme + percent_encode(path, [](unsigned char c) {
           return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
         });
}

// SARIF's levels are the severities' names, but for info, which SARIF calls a note.
std::string_view sarif_level(Severity s) {
  return s == Severity::kInfo ? "note" : severity_name(s);
}

}  // namespace

std::string rule_docs_uri(std::string_view id) {
  return std::string(GPULEAK_RULE_DOCS_URL) + std::string(id) + ".md";
}

void write_sarif(std::ostream& out, const LintRun& run, std::string_view tool_version) {
  json rules = json::array();
  for (const RuleInfo* rule : rule_catalog()) {
    rules.push_back(
        {{"id", rule->id},
         {"name", rule->name},
         {"shortDescription", {{"text", rule->summary}}},
         {"fullDescription", {{"text", rule->why}}},
         {"help", {{"text", rule->fix}}},
         {"helpUri", rule_docs_uri(rule->id)},
         {"defaultConfiguration", {{"level", sarif_level(rule->severity)}}},
         {"properties",
          {{"cause", cause_slug(rule->cause)}, {"tags", json::array({cause_slug(rule->cause)})}}}});
  }
  auto rule_index = [](const RuleInfo* rule) {
    const auto& all = rule_catalog();
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all[i] == rule) return i;
    }
    return std::size_t{0};
  };
  json results = json::array();
  json notifications = json::array();
  json warnings = json::array();  // statements not parsed: reported, not a failure
  for (const FileReport& report : run.reports) {
    if (report.problem) {
      json notification = {{"level", "error"},
                           {"message", {{"text", report.path + ": " + report.problem->message}}}};
      json location = {
          {"physicalLocation", {{"artifactLocation", {{"uri", path_to_uri(report.path)}}}}}};
      if (report.problem->position.line > 0) {
        location["physicalLocation"]["region"] = {{"startLine", report.problem->position.line},
                                                  {"startColumn", report.problem->position.column}};
      }
      notification["locations"] = json::array({location});
      notifications.push_back(notification);
    }
    for (const FileProblem& u : report.unparsed) {
      warnings.push_back(
          {{"level", "warning"},
           {"message", {{"text", report.path + ": " + u.message}}},
           {"locations",
            json::array(
                {{{"physicalLocation",
                   {{"artifactLocation", {{"uri", path_to_uri(report.path)}}},
                    {"region",
                     {{"startLine", u.position.line}, {"startColumn", u.position.column}}}}}}})}});
    }
    for (const Finding& f : report.findings) {
      std::string snippet;
      for (const auto& line : f.frame) {
        if (line.line >= f.start.line && line.line <= f.end.line) snippet += line.text + "\n";
      }
      json region = {{"startLine", f.start.line},
                     {"startColumn", f.start.column},
                     {"endLine", f.end.line},
                     {"endColumn", std::max(f.end.column, 1u)}};
      if (!snippet.empty()) region["snippet"] = {{"text", snippet}};
      json properties = {{"cause", cause_slug(f.rule->cause)}, {"why", f.why}, {"fix", f.fix}};
      if (f.cell > 0) properties["notebookCell"] = f.cell;
      results.push_back(
          {{"ruleId", f.rule->id},
           {"ruleIndex", rule_index(f.rule)},
           {"level", sarif_level(f.severity)},
           {"message", {{"text", f.message + ". Fix: " + f.fix}}},
           {"locations", json::array({{{"physicalLocation",
                                        {{"artifactLocation", {{"uri", path_to_uri(report.path)}}},
                                         {"region", region}}}}})},
           {"properties", properties}});
    }
  }
  for (const std::string& missing : run.missing) {
    notifications.push_back(
        {{"level", "error"}, {"message", {{"text", missing + ": no such file or folder"}}}});
  }
  for (const std::string& problem : run.problems) {
    notifications.push_back({{"level", "error"}, {"message", {{"text", problem}}}});
  }
  json invocation = {{"executionSuccessful", notifications.empty()}};
  for (auto& w : warnings) notifications.push_back(std::move(w));
  if (!notifications.empty()) invocation["toolExecutionNotifications"] = notifications;
  json doc = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", json::array({{{"tool",
                              {{"driver",
                                {{"name", "gpuleak"},
                                 {"semanticVersion", tool_version},
                                 {"version", tool_version},
                                 {"rules", rules}}}}},
                             {"columnKind", "unicodeCodePoints"},
                             {"invocations", json::array({invocation})},
                             {"results", results}}})},
  };
  out << doc.dump(2) << '\n';
}

}  // namespace gpuleak::lint
