#include "suppression.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

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

// `# noqa` (every rule) or `# noqa: GL101, GL203` (flake8 and ruff write the
// codes after a colon, separated by commas or spaces). Codes of other tools
// (`# noqa: E501`) suppress nothing here. Empty optional: no noqa comment.
std::optional<std::vector<std::string>> noqa_codes(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::size_t at = lower.find("noqa");
  while (at != std::string::npos) {
    // A directive: "#" and spaces before it, and no letter right after.
    std::size_t before = at;
    while (before > 0 && (lower[before - 1] == ' ' || lower[before - 1] == '\t')) --before;
    bool directive = before > 0 && lower[before - 1] == '#';
    std::size_t after = at + 4;
    bool word_ends =
        after >= lower.size() || !std::isalnum(static_cast<unsigned char>(lower[after]));
    if (directive && word_ends) break;
    at = lower.find("noqa", at + 4);
  }
  if (at == std::string::npos) return std::nullopt;
  std::string_view rest = text.substr(at + 4);
  std::size_t spaces = 0;
  while (spaces < rest.size() && (rest[spaces] == ' ' || rest[spaces] == '\t')) ++spaces;
  std::vector<std::string> codes;
  if (spaces >= rest.size() || rest[spaces] != ':') return codes;  // bare: every rule
  rest.remove_prefix(spaces + 1);
  std::string current;
  for (std::size_t i = 0; i <= rest.size(); ++i) {
    char c = i < rest.size() ? rest[i] : ' ';
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      current += c;
      continue;
    }
    if (!current.empty()) codes.push_back(current);
    current.clear();
    if (c != ' ' && c != ',' && c != '\t') break;  // the list ends at anything else
  }
  // `# noqa:` with nothing after it: a typo for a bare noqa; flake8 reads it so.
  return codes;
}

}  // namespace

Suppressions::Suppressions(const SyntaxTree& tree) {
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (tree.kind(id) != NodeKind::kComment) continue;
    std::string_view text = tree.text(id);
    if (auto codes = noqa_codes(text)) {
      auto& entry = by_row_[tree.start_point(id).row];
      if (codes->empty()) {
        entry.clear();
        entry.emplace_back();  // every rule
      } else if (!(entry.size() == 1 && entry.front().empty())) {
        entry.insert(entry.end(), codes->begin(), codes->end());
      }
    }
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
    auto& entry = by_row_[tree.start_point(id).row];
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
