// Where the text of a source line may come from, and reading it safely.
//
// A trace names files (Python co_filename, DWARF paths of embedded symbols)
// that whoever writes the trace chooses. `gpuleak report` therefore shows
// source text only from the trace itself (SourceLineRecords, captured by
// `gpuleak run` on the machine that ran the program), or, when asked, from a
// checkout the user names (`--source-root`), looked up inside that folder
// only. `gpuleak run` reads the program's own files (the live messages and
// the capture at exit), through the same guarded reader.
//
// The reader opens regular files only (never a FIFO, a device, a socket;
// nothing on /proc or /sys), of at most kMaxSourceFileBytes, without
// blocking, and returns at most kMaxSourceLineBytes of one line.
//
// Pure functions of the file system; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace gpuleak::analysis {

struct SourceLookup {
  enum class Mode {
    kEmbeddedOnly,  // `report`: the trace's SourceLineRecords, nothing else
    kLocalFiles,    // `run`: the paths as the trace names them, on this machine
    kCheckout,      // `report --source-root DIR`: paths looked up inside `root`
  };
  Mode mode = Mode::kEmbeddedOnly;
  std::string root;  // kCheckout only
};

inline constexpr std::uint64_t kMaxSourceFileBytes = 16u << 20;

// Lines `wanted` of the file at `path` (1-based), trimmed and shortened;
// lines past the end are absent. Empty when the file is refused or unreadable.
std::map<std::uint32_t, std::string> read_source_lines(const std::string& path,
                                                       const std::set<std::uint32_t>& wanted);

// Where `traced_path` is inside the checkout at `root`: root joined with the
// longest tail of traced_path that names a regular file whose real path is
// inside root. nullopt when none does (or the path climbs out with "..").
std::optional<std::string> find_in_checkout(const std::string& root,
                                            const std::string& traced_path);

}  // namespace gpuleak::analysis
