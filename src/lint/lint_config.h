// Settings from pyproject.toml's [tool.gpuleak] table:
//
//   [tool.gpuleak]
//   select = ["GL1", "GL301"]     # rules to run (ids, id prefixes or names); default: all
//   ignore = ["GL503"]            # rules to skip; wins over select
//   exclude = ["build", "*_pb2.py"]  # folders/files not linted (fnmatch globs)
//
// Any other key is refused (a typo would otherwise be ignored silently);
// sub-tables such as [tool.gpuleak.run] are left to other commands.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuleak::lint {

struct LintConfig {
  std::filesystem::path source;  // the pyproject.toml read; empty when none
  std::vector<std::string> select;
  std::vector<std::string> ignore;
  std::vector<std::string> exclude;
};

// A pyproject.toml that cannot be used: the message names the file and,
// for TOML syntax errors, the line and column.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads [tool.gpuleak] from one file. Throws ConfigError.
LintConfig load_config(const std::filesystem::path& pyproject);

// The nearest pyproject.toml with a [tool.gpuleak] table, looking in
// `start` (a folder, or a file's folder) and its parents. Throws ConfigError
// for a pyproject.toml that does not parse on the way up.
std::optional<LintConfig> find_config(const std::filesystem::path& start);

}  // namespace gpuleak::lint
