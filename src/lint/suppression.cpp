#include "suppression.h"

#include <algorithm>
#include <cctype>

namespace gpuleak::lint {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool same_id(std::string_view listed, const RuleInfo& rule) {
  if (listed == rule.name) return true;
  return listed.size() == rule.id.size() &&
         std::equal(listed.begin(), listed.end(), rule.id.begin(), [](char a, char b) {
           return std::toupper(static_cast<unsigned char>(a)) == b;
         });
}

}  // namespace

Suppressions::Suppressions(const SyntaxTree& tree) {
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (tree.kind(id) != NodeKind::kComment) continue;
    std::string_view text = tree.text(id);
    std::size_t at = text.find("gpuleak:");
    if (at == std::string_view::npos) continue;
    std::string_view rest = trim(text.substr(at + 8));
    if (rest.substr(0, 6) != "ignore") continue;
    rest = trim(rest.substr(6));
    std::vector<std::string> ids;
    if (!rest.empty() && rest.front() == '[') {
      std::size_t close = rest.find(']');
      std::string_view list =
          rest.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1);
      while (!list.empty()) {
        std::size_t comma = list.find(',');
        std::string_view item = trim(list.substr(0, comma));
        if (!item.empty()) ids.emplace_back(item);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
      // `ignore[]` names nothing: suppress nothing rather than everything.
      if (ids.empty()) continue;
    }
    auto& entry = by_row_[tree.node(id).start_row];
    if (ids.empty()) {
      entry.clear();
      entry.emplace_back();  // marker: every rule
    } else if (!(entry.size() == 1 && entry.front().empty())) {
      entry.insert(entry.end(), ids.begin(), ids.end());
    }
  }
}

bool Suppressions::suppresses(const RuleInfo& rule, std::uint32_t first_row,
                              std::uint32_t last_row) const {
  for (std::uint32_t row = first_row; row <= last_row; ++row) {
    auto it = by_row_.find(row);
    if (it == by_row_.end()) continue;
    for (const std::string& listed : it->second) {
      if (listed.empty() || same_id(listed, rule)) return true;
    }
  }
  return false;
}

}  // namespace gpuleak::lint
