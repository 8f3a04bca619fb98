// Reading a whole trace file into an analysis (`gpuleak report`).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "analysis/process_analysis.h"

namespace gpuleak::analysis {

using ProgressCallback = std::function<void(std::uint64_t bytes_done, std::uint64_t bytes_total)>;

// Reads `path` to its end (trace/trace_feed.h) and returns the report. A
// trace that cannot be opened or is not a gpuleak trace throws
// trace::TraceError; one that is truncated or corrupt part-way is reported
// up to the damage, with the error in ProcessReport::trace_error.
ProcessReport analyze_trace_file(const std::string& path, const AnalysisOptions& options,
                                 const ProgressCallback& progress = {});

// analyze_trace_file for callers that go on with the other traces: the
// report, or the one sentence that says why there is none (the TraceError's
// text, or "PATH: not enough memory to READING" when the reading ran out of
// memory; `reading` is what was being done: "read this trace").
struct TraceReading {
  std::optional<ProcessReport> report;
  std::string error;
};
TraceReading read_trace_report(const std::string& path, const AnalysisOptions& options,
                               const std::string& reading, const ProgressCallback& progress = {});

}  // namespace gpuleak::analysis
