// Inline suppressions, on any line of the flagged code:
// - `# gpuleak: ignore[GL101]`, `# gpuleak: ignore[GL101, GL203]`, or a bare
//   `# gpuleak: ignore` (every rule); entries may be ids or rule names;
// - flake8/ruff style `# noqa: GL101, GL203` (codes of other tools, `# noqa:
//   E501`, suppress nothing) or a bare `# noqa` (every rule).
// Comments are read from the syntax tree, so the same text inside a string
// does not count.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "lint.h"
#include "syntax_tree.h"

namespace gpuleak::lint {

class Suppressions {
 public:
  explicit Suppressions(const SyntaxTree& tree);
  // Rows are 0-based, inclusive.
  bool suppresses(const RuleInfo& rule, std::uint32_t first_row, std::uint32_t last_row) const;

 private:
  // Row -> listed ids/names; an empty list means every rule.
  std::unordered_map<std::uint32_t, std::vector<std::string>> by_row_;
};

}  // namespace gpuleak::lint
