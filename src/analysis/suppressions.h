// Suppressions: memory that is meant to live until the process ends (a
// global pool, a cache owned by a library) and should not be reported.
//
// File format, one rule per line; '#' starts a comment:
//   leak:<glob>   matches a group when any of its frames matches <glob> by
//                 function name, source file (full path or base name),
//                 "file:line", or module (full path or base name)
//   kind:<kind>   matches every allocation of a memory kind ("host-pinned", ...)
// Globs use shell wildcards (*, ?, [...]).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

class Suppressions {
 public:
  // Parses rules; on a bad line returns false with "line N: why" in `error`.
  bool parse(const std::string& text, std::string* error);
  // The rule (as written) that suppresses `group`, if any.
  std::optional<std::string> match(const LeakGroup& group) const;
  bool empty() const { return rules_.empty(); }

 private:
  struct Rule {
    enum class Type { kFrame, kKind } type;
    std::string pattern;
    std::string text;
  };
  std::vector<Rule> rules_;
};

}  // namespace gpuleak::analysis
