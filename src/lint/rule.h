// How a rule plugs into the linter. One rule per file under rules/: its
// RuleInfo and a function that checks one file, made a Rule by make_rule in
// the file's make_*_rule() factory, which rule_catalog.cpp lists.
//
// A rule reads a FileAnalysis (never the raw tree-sitter API) and reports
// through a FindingSink with the node to point at and a message that names
// the user's own variables. Rules are stateless and shared between threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "file_analysis.h"
#include "lint.h"

namespace gpuleak::lint {

struct RuleReport {
  NodeId node = kNoNode;             // what to underline
  std::string message;               // what this code does
  std::string fix;                   // concrete change; empty: the rule's general fix
  std::string why;                   // empty: the rule's general explanation
  std::optional<Severity> severity;  // empty: the rule's default
};

class FindingSink {
 public:
  virtual ~FindingSink() = default;
  virtual void report(const RuleInfo& rule, RuleReport report) = 0;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual const RuleInfo& info() const = 0;
  virtual void check(const FileAnalysis& file, FindingSink& sink) const = 0;
};

// The rule that `info` describes and `check` applies. `info` must outlive the
// rule (the rules' own are constants); `check` must keep no state.
using FileCheck = void (*)(const FileAnalysis& file, FindingSink& sink);
std::unique_ptr<Rule> make_rule(const RuleInfo& info, FileCheck check);

// Every rule, sorted by id.
const std::vector<std::unique_ptr<Rule>>& all_rules();

// Short code quotes for messages: the node's text on one line, shortened.
std::string quote(const FileAnalysis& file, NodeId node, std::size_t max_chars = 60);

}  // namespace gpuleak::lint
