#include "lint_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <vector>

namespace gpuleak::lint {
namespace {

std::vector<std::string> string_list(const toml::table& table, std::string_view key,
                                     const std::filesystem::path& file) {
  std::vector<std::string> out;
  const toml::node* node = table.get(key);
  if (node == nullptr) return out;
  if (const auto* s = node->as_string()) {
    out.push_back(s->get());
    return out;
  }
  const auto* array = node->as_array();
  bool ok = array != nullptr;
  if (ok) {
    for (const toml::node& item : *array) {
      const auto* s = item.as_string();
      if (s == nullptr) {
        ok = false;
        break;
      }
      out.push_back(s->get());
    }
  }
  if (!ok) {
    const auto& where = node->source().begin;
    throw ConfigError(fmt::format("{}:{}:{}: [tool.gpuleak] {} must be a list of strings",
                                  file.string(), where.line, where.column, key));
  }
  return out;
}

toml::table parse_file(const std::filesystem::path& pyproject) {
  try {
    return toml::parse_file(pyproject.string());
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw ConfigError(fmt::format("{}:{}:{}: invalid TOML: {}", pyproject.string(), where.line,
                                  where.column, e.description()));
  }
}

const toml::table* gpuleak_table(const toml::table& root) {
  const toml::table* tool = root["tool"].as_table();
  return tool ? (*tool)["gpuleak"].as_table() : nullptr;
}

// The keys `gpuleak lint` reads; a sub-table (`[tool.gpuleak.run]`) is left
// to the command it is named after.
constexpr std::string_view kKnownKeys[] = {"select", "ignore", "exclude"};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void reject_unknown_keys(const toml::table& table, const std::filesystem::path& file) {
  for (const auto& [key, node] : table) {
    if (node.is_table()) continue;
    std::string_view k = key.str();
    bool known = false;
    for (std::string_view w : kKnownKeys) known |= k == w;
    if (known) continue;
    // A near miss is most likely a typo of a known key: name it.
    std::string hint;
    for (std::string_view w : kKnownKeys) {
      if (edit_distance(k, w) <= 2) hint = fmt::format(" (did you mean `{}`?)", w);
    }
    const auto& where = key.source().begin;
    throw ConfigError(fmt::format(
        "{}:{}:{}: unknown key `{}` in [tool.gpuleak]{}; gpuleak lint reads select, ignore and "
        "exclude",
        file.string(), where.line, where.column, k, hint));
  }
}

}  // namespace

LintConfig load_config(const std::filesystem::path& pyproject) {
  toml::table root = parse_file(pyproject);
  LintConfig config;
  config.source = pyproject;
  const toml::table* table = gpuleak_table(root);
  if (table == nullptr) return config;
  reject_unknown_keys(*table, pyproject);
  config.select = string_list(*table, "select", pyproject);
  config.ignore = string_list(*table, "ignore", pyproject);
  config.exclude = string_list(*table, "exclude", pyproject);
  return config;
}

std::optional<LintConfig> find_config(const std::filesystem::path& start) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(start, ec);
  if (ec) return std::nullopt;
  if (!std::filesystem::is_directory(dir, ec)) dir = dir.parent_path();
  for (int hops = 0; hops < 64 && !dir.empty(); ++hops) {
    std::filesystem::path candidate = dir / "pyproject.toml";
    if (std::filesystem::is_regular_file(candidate, ec)) {
      toml::table root = parse_file(candidate);
      if (gpuleak_table(root) != nullptr) return load_config(candidate);
    }
    std::filesystem::path parent = dir.parent_path();
    if (parent == dir) break;
    dir = parent;
  }
  return std::nullopt;
}

}  // namespace gpuleak::lint
