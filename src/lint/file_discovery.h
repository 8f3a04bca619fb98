// Expands the PATH arguments of `gpuleak lint` into the files to lint.
//
// A file named on the command line is always linted (as a notebook when it
// ends in .ipynb, as Python otherwise). Folders are walked recursively for
// *.py and *.ipynb, skipping hidden folders, __pycache__ and node_modules,
// and anything matching an exclude pattern. Symlinked folders are not
// followed, so a link cycle cannot loop.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace gpuleak::lint {

struct DiscoveredFiles {
  std::vector<std::filesystem::path> files;  // sorted, without duplicates
  std::vector<std::string> missing;          // arguments that do not exist
  std::vector<std::string> problems;         // folders that could not be listed, and why
};

// `exclude` holds glob patterns (fnmatch) tried against each file or folder
// name and against its path relative to the argument it was found under.
DiscoveredFiles discover_files(const std::vector<std::string>& paths,
                               const std::vector<std::string>& exclude);

}  // namespace gpuleak::lint
