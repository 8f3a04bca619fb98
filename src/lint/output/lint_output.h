// The ways a lint run is written: text for people (or, with statistics, a
// count per rule), JSON for scripts, SARIF 2.1.0 for code-scanning tools,
// GitHub Actions workflow commands for annotations on a pull request. Each
// writer takes the whole run so it can add a summary; none of them prints
// file problems to stderr (the command does that, for every format).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "lint/lint.h"

namespace gpuleak::lint {

struct LintRun {
  std::vector<FileReport> reports;    // one per file, in path order
  std::vector<std::string> missing;   // PATH arguments that do not exist
  std::vector<std::string> problems;  // folders that could not be listed
  std::uint64_t bytes = 0;
  double seconds = 0;

  std::size_t finding_count() const;
  std::size_t files_not_linted() const;
  std::size_t unparsed_statements() const;
};

void write_text(std::ostream& out, const LintRun& run, bool color);
void write_json(std::ostream& out, const LintRun& run, std::string_view tool_version);
void write_sarif(std::ostream& out, const LintRun& run, std::string_view tool_version);
// `::error file=...,line=...::message` per finding, and `::warning` per file
// or statement that could not be linted; GitHub shows them on the diff.
void write_github(std::ostream& out, const LintRun& run);
// One line per rule with findings: count, id, name; most frequent first.
void write_statistics(std::ostream& out, const LintRun& run);

// Where a rule's documentation page is (SARIF helpUri): the configured base
// (-DGPULEAK_RULE_DOCS_URL at build time) followed by "<ID>.md".
std::string rule_docs_uri(std::string_view id);

// The rule catalog, for --list-rules.
void write_rules_text(std::ostream& out);
void write_rules_json(std::ostream& out);

// "train.py:12:5" / "nb.ipynb:cell 3:12:5" as people and editors read it.
std::string format_location(const std::string& path, std::uint32_t cell, const Position& p);

}  // namespace gpuleak::lint
