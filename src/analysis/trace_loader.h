// Reading whole trace files into an analysis, and writing the symbols of a
// finished trace back into it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "analysis/process_analysis.h"

namespace gpuleak::analysis {

using ProgressCallback = std::function<void(std::uint64_t bytes_done, std::uint64_t bytes_total)>;

// Reads `path` to its end and returns the report. A trace that cannot be
// opened or is not a gpuleak trace throws trace::TraceError; one that is
// truncated or corrupt part-way is reported up to the damage, with the
// error in ProcessReport::trace_error.
ProcessReport analyze_trace_file(const std::string& path, const AnalysisOptions& options,
                                 const ProgressCallback& progress = {});

// Symbolizes every native address of the trace on this machine, reads the
// source line of every stack's site from this machine's files (through the
// guarded reader of analysis/source_lines.h), and appends both as one block
// of SymbolRecords and SourceLineRecords, so the trace reads the same
// elsewhere and reports never open the files it names. Returns the number
// of records written; on failure (a write error, a full disk), false with
// `error`.
bool embed_symbols(const std::string& path, std::size_t* written, std::string* error);

// At most this many source lines are captured per trace.
inline constexpr std::size_t kMaxSourceLinesEmbedded = 100000;

}  // namespace gpuleak::analysis
