// The source lines of a finished trace's sites written into it, on the
// machine that ran the program: for every stack, the line of the frame the
// reports blame (site choice, report_model.h) is read from this machine's
// files through the guarded reader of source_lines.h and appended as one
// block of SourceLineRecords, so reports show the code elsewhere and never
// open the files a trace names. `gpuleak run` does it right after the
// program exits, after symbolize/embedded_symbols.h (native sites need
// their file and line first).
//
// Not thread-safe; the trace must not be written by anyone else meanwhile.
#pragma once

#include <cstddef>
#include <string>

namespace gpuleak::analysis {

// At most this many source lines are captured per trace.
inline constexpr std::size_t kMaxSourceLinesEmbedded = 100000;

// Reads the stacks of `path` (trace/trace_feed.h: damage part-way ends
// reading, what came before counts) and appends the lines that could be
// read. Returns true with the number of records written in `written`;
// false with `error` when the trace cannot be read at all or the block
// cannot be written.
bool embed_site_source_lines(const std::string& path, std::size_t* written, std::string* error);

}  // namespace gpuleak::analysis
