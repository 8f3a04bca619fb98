// Small helpers shared by the lint tests: lint a snippet, find a node by its
// text, make a scratch folder.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lint/lint.h"

namespace gpuleak::lint::testing {

// Lints Python source and returns the ids of the findings, in order.
std::vector<std::string> rule_ids(std::string_view source);
// Lints Python source with every rule.
FileReport lint_snippet(std::string_view source, LintOptions options = {});

// A fresh folder under the build tree, removed when the object dies.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& name);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Writes `content` to `relative` (creating folders) and returns the full path.
  std::filesystem::path write(const std::string& relative, std::string_view content) const;

 private:
  std::filesystem::path path_;
};

}  // namespace gpuleak::lint::testing
