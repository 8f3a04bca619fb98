// The folder a recording writes its traces into, as `run` and `attach`
// create and read it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace gpuleak::cli {

// Creates `path` and the folders above it that do not exist, each 0700:
// traces are private to their user (docs/security.md). Existing folders are
// left as they are. Throws InputError when one cannot be created.
void make_private_directories(const std::string& path);

// Throws UsageError when `dir` already holds traces (of an earlier recording).
void refuse_folder_with_traces(const std::string& dir);

// The pid in a trace file's name ("gpuleak-4711.trace", "gpuleak-4711-1.trace"), or 0.
int pid_of_trace_file(const std::filesystem::path& path);

// Adds symbols, then the text of each site's source line, to each trace
// (so reports read the same on other machines); returns what could not be
// added, one sentence each.
std::vector<std::string> embed_symbols_and_sources(const std::vector<std::string>& files);

}  // namespace gpuleak::cli
