// `gpuleak report --format FORMAT -o FILE`: the exports of report/exports.h,
// made from the traces a report read (docs/exports.md).
#pragma once

#include <optional>
#include <string>

#include "cli/report_outputs.h"
#include "report/exports.h"

namespace gpuleak::cli {

struct ExportFlags {
  std::string format;  // "" when no export is asked for
  std::string output;  // -o FILE
  std::string view = "growth-per-step";
  std::optional<std::uint32_t> pid;
};

// Checks the flags (an unknown format lists the known ones); throws UsageError.
void check_export_flags(const ExportFlags& flags);

// Reads each chosen trace again with the export's request
// (report::export_request) and writes the file. Returns what went wrong,
// one sentence each (empty: written); prints where it wrote on `err`.
std::vector<std::string> write_export_file(const TraceReports& reports,
                                           const analysis::AnalysisOptions& options,
                                           const ExportFlags& flags, bool all_frames,
                                           std::ostream& err);

}  // namespace gpuleak::cli
