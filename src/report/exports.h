// Exports of a report into the files other tools open (docs/exports.md):
// PyTorch's memory_viz snapshot pickle, Perfetto / Chrome trace JSON,
// speedscope JSON, folded stacks, pprof (profile.proto, gzip) and CSV.
//
// Every export is a writer over the same reports the text, JSON and HTML
// outputs read: it draws nothing of its own from the trace. What the report
// does not carry (each growing site's series, the live set at the peak, the
// last events) is in ProcessReport::export_detail, which the analysis keeps
// when asked (analysis/export_detail.h; export_request() says what to ask).
//
// Each writer names what a bound left out in the file's own metadata.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/export_detail.h"
#include "analysis/model/report_model.h"

namespace gpuleak::report {

enum class ExportFormat { kMemoryViz, kPerfetto, kSpeedscope, kFolded, kPprof, kCsv };

// "memory_viz", "perfetto", "speedscope", "folded", "pprof", "csv".
const char* export_format_name(ExportFormat format);
std::optional<ExportFormat> parse_export_format(const std::string& name);
// The names, comma-separated, for messages.
std::string export_format_names();

// Which memory a flame graph weighs (folded stacks; speedscope and pprof
// carry all three).
enum class FlameView { kGrowthPerStep, kLiveAtExit, kLiveAtPeak };
const char* flame_view_name(FlameView view);  // "growth-per-step", "live-at-exit", "live-at-peak"
std::optional<FlameView> parse_flame_view(const std::string& name);

struct ExportOptions {
  FlameView view = FlameView::kGrowthPerStep;  // folded stacks only
  bool all_frames = false;  // keep frames inside CUDA, PyTorch and Python (as --all-frames)
  std::string producer = "gpuleak";  // named in each file's metadata ("gpuleak 0.9.0")
};

// What the second reading of a trace should keep for `format`, given the
// first reading's report of it.
analysis::ExportRequest export_request(ExportFormat format, const analysis::ProcessReport& first);

// Whether `format` can hold several processes in one file (memory_viz
// cannot: a snapshot is one process's allocator).
bool holds_several_processes(ExportFormat format);

// Writes the processes (each with its export_detail) in `format`. Binary
// formats (pprof, memory_viz) need a stream opened in binary mode.
void write_export(ExportFormat format, const std::vector<const analysis::ProcessReport*>& processes,
                  const ExportOptions& options, std::ostream& out);

}  // namespace gpuleak::report
