#include "file_discovery.h"

#include <fnmatch.h>

#include <algorithm>
#include <system_error>

namespace gpuleak::lint {
namespace {

bool excluded(const std::filesystem::path& path, const std::filesystem::path& relative,
              const std::vector<std::string>& exclude) {
  std::string name = path.filename().string();
  std::string rel = relative.generic_string();
  for (const std::string& pattern : exclude) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
    if (fnmatch(pattern.c_str(), rel.c_str(), FNM_PATHNAME) == 0) return true;
    // "build/" or "build" names a folder anywhere.
    std::string bare = pattern;
    while (!bare.empty() && bare.back() == '/') bare.pop_back();
    if (!bare.empty() && fnmatch(bare.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

bool skipped_folder(const std::string& name) {
  return (name.size() > 1 && name.front() == '.') || name == "__pycache__" ||
         name == "node_modules";
}

bool lintable(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  return ext == ".py" || ext == ".ipynb";
}

}  // namespace

DiscoveredFiles discover_files(const std::vector<std::string>& paths,
                               const std::vector<std::string>& exclude) {
  namespace fs = std::filesystem;
  DiscoveredFiles out;
  for (const std::string& arg : paths) {
    fs::path root(arg);
    std::error_code ec;
    fs::file_status status = fs::status(root, ec);
    if (ec || !fs::exists(status)) {
      // A dangling symlink exists as a link but not as a target.
      out.missing.push_back(arg);
      continue;
    }
    if (!fs::is_directory(status)) {
      out.files.push_back(root);
      continue;
    }
    // Depth first, one folder at a time, so that a folder that cannot be
    // listed is reported by name and its siblings are still walked.
    std::vector<fs::path> pending{root};
    while (!pending.empty()) {
      fs::path folder = std::move(pending.back());
      pending.pop_back();
      fs::directory_iterator it(folder, ec);
      if (ec) {
        out.problems.push_back(folder.string() + ": cannot list folder: " + ec.message());
        ec.clear();
        continue;
      }
      std::vector<fs::path> subfolders;
      for (fs::directory_iterator end; it != end; it.increment(ec)) {
        if (ec) {
          out.problems.push_back(folder.string() + ": cannot list folder: " + ec.message());
          ec.clear();
          break;
        }
        const fs::directory_entry& entry = *it;
        fs::path relative = entry.path().lexically_relative(root);
        std::error_code type_ec;
        bool is_dir = entry.is_directory(type_ec) && !entry.is_symlink(type_ec);
        if (is_dir) {
          if (!skipped_folder(entry.path().filename().string()) &&
              !excluded(entry.path(), relative, exclude)) {
            subfolders.push_back(entry.path());
          }
          continue;
        }
        if (!entry.is_regular_file(type_ec) || !lintable(entry.path())) continue;
        if (excluded(entry.path(), relative, exclude)) continue;
        out.files.push_back(entry.path());
      }
      std::sort(subfolders.rbegin(), subfolders.rend());
      for (auto& f : subfolders) pending.push_back(std::move(f));
    }
  }
  std::sort(out.files.begin(), out.files.end());
  out.files.erase(std::unique(out.files.begin(), out.files.end()), out.files.end());
  return out;
}

}  // namespace gpuleak::lint
