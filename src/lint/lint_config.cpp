#include "lint_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

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

}  // namespace

LintConfig load_config(const std::filesystem::path& pyproject) {
  toml::table root = parse_file(pyproject);
  LintConfig config;
  config.source = pyproject;
  const toml::table* table = gpuleak_table(root);
  if (table == nullptr) return config;
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
