#include "analysis/suppressions.h"

#include <fnmatch.h>

#include <sstream>

namespace gpuleak::analysis {

namespace {

std::string trim(const std::string& s) {
  auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return {};
  auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool glob(const std::string& pattern, const std::string& text) {
  return !text.empty() && ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace

bool Suppressions::parse(const std::string& text, std::string* error) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (auto hash = line.find('#'); hash != std::string::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    auto colon = line.find(':');
    std::string type = colon == std::string::npos ? "" : line.substr(0, colon);
    std::string pattern = colon == std::string::npos ? "" : trim(line.substr(colon + 1));
    if ((type != "leak" && type != "kind") || pattern.empty()) {
      *error = "line " + std::to_string(number) +
               ": expected 'leak:<pattern>' or 'kind:<memory kind>', got '" + line + "'";
      return false;
    }
    rules_.push_back(Rule{type == "leak" ? Rule::Type::kFrame : Rule::Type::kKind, pattern, line});
  }
  return true;
}

std::optional<std::string> Suppressions::match(const LeakGroup& group) const {
  for (const Rule& rule : rules_) {
    if (rule.type == Rule::Type::kKind) {
      if (glob(rule.pattern, trace::memory_kind_name(group.kind))) return rule.text;
      continue;
    }
    for (const Frame& f : group.frames) {
      std::string file_line =
          f.file.empty() ? "" : base_name(f.file) + ":" + std::to_string(f.line);
      if (glob(rule.pattern, f.function) || glob(rule.pattern, f.file) ||
          glob(rule.pattern, base_name(f.file)) || glob(rule.pattern, file_line) ||
          glob(rule.pattern, f.module) || glob(rule.pattern, base_name(f.module))) {
        return rule.text;
      }
    }
  }
  return std::nullopt;
}

}  // namespace gpuleak::analysis
