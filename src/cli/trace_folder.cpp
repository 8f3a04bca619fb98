#include "cli/trace_folder.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "analysis/writeback/site_source_lines.h"
#include "cli/command.h"
#include "symbolize/embedded_symbols.h"

namespace gpuleak::cli {

namespace fs = std::filesystem;

void make_private_directories(const std::string& path) {
  std::string partial;
  std::size_t at = 0;
  while (at != std::string::npos) {
    at = path.find('/', at + 1);
    partial = path.substr(0, at);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      throw InputError("cannot create trace folder " + partial + ": " + std::strerror(errno));
  }
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw InputError("cannot create trace folder " + path);
}

void refuse_folder_with_traces(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".trace") {
      throw UsageError(dir +
                       " already holds traces of an earlier run; choose another folder with -o");
    }
  }
}

int pid_of_trace_file(const fs::path& path) {
  std::string name = path.filename().string();
  if (path.extension() != ".trace" || name.rfind("gpuleak-", 0) != 0) return 0;
  return std::atoi(name.c_str() + 8);
}

std::vector<std::string> embed_symbols_and_sources(const std::vector<std::string>& files) {
  std::vector<std::string> problems;
  for (const auto& file : files) {
    std::size_t written = 0;
    std::string error;
    // Symbols first: a native site needs its file and line before its
    // source line can be read.
    if (!symbolize::embed_symbols(file, &written, &error) ||
        !analysis::embed_site_source_lines(file, &written, &error))
      problems.push_back(
          fmt::format("could not add symbols and source lines to {}: {}", file, error));
  }
  return problems;
}

}  // namespace gpuleak::cli
