// --select / --ignore / [tool.gpuleak] select and ignore.
#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "lint.h"

namespace gpuleak::lint {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

// An entry matches by id prefix ("GL", "GL1", "GL101") or by exact name.
bool matches(const std::string& entry, const RuleInfo& rule) {
  if (entry == rule.name) return true;
  std::string e = upper(entry);
  return e.size() >= 2 && e.size() <= rule.id.size() &&
         std::string_view(rule.id).substr(0, e.size()) == e;
}

void check_entries(const std::vector<std::string>& entries, const char* what) {
  for (const std::string& entry : entries) {
    bool any = std::any_of(rule_catalog().begin(), rule_catalog().end(),
                           [&](const RuleInfo* r) { return matches(entry, *r); });
    if (!any) {
      throw std::invalid_argument("unknown rule '" + entry + "' in " + what +
                                  " (gpuleak lint --list-rules shows the rules)");
    }
  }
}

}  // namespace

RuleSelection::RuleSelection(std::vector<std::string> select, std::vector<std::string> ignore)
    : select_(std::move(select)), ignore_(std::move(ignore)) {
  check_entries(select_, "select");
  check_entries(ignore_, "ignore");
}

bool RuleSelection::enabled(const RuleInfo& rule) const {
  for (const auto& e : ignore_) {
    if (matches(e, rule)) return false;
  }
  if (select_.empty()) return true;
  for (const auto& e : select_) {
    if (matches(e, rule)) return true;
  }
  return false;
}

}  // namespace gpuleak::lint
