#include "lint_test_support.h"

#include <unistd.h>

#include <fstream>

namespace gpuleak::lint::testing {

FileReport lint_snippet(std::string_view source, LintOptions options) {
  Linter linter(std::move(options));
  return linter.lint_python("snippet.py", source);
}

std::vector<std::string> rule_ids(std::string_view source) {
  std::vector<std::string> ids;
  for (const auto& f : lint_snippet(source).findings) ids.emplace_back(f.rule->id);
  return ids;
}

ScratchFolder::ScratchFolder(const std::string& name) {
  path_ = std::filesystem::path(GPULEAK_BINARY_DIR) / "lint-test-scratch" /
          (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchFolder::~ScratchFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path ScratchFolder::write(const std::string& relative,
                                           std::string_view content) const {
  std::filesystem::path full = path_ / relative;
  std::filesystem::create_directories(full.parent_path());
  std::ofstream out(full, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  return full;
}

}  // namespace gpuleak::lint::testing
