#include "cli/report_export.h"

#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "analysis/trace_loader.h"
#include "cli/command.h"
#include "cli/version.h"
#include "trace/trace_reader.h"

namespace gpuleak::cli {

void check_export_flags(const ExportFlags& flags) {
  if (flags.format.empty()) {
    if (!flags.output.empty())
      throw UsageError("-o names the file of an export: add --format FORMAT");
    return;
  }
  if (!report::parse_export_format(flags.format)) {
    throw UsageError(fmt::format("--format '{}': not a format gpuleak writes (known: {})",
                                 flags.format, report::export_format_names()));
  }
  if (flags.output.empty()) {
    throw UsageError(fmt::format("--format {} needs -o FILE (use -o - for stdout)", flags.format));
  }
  if (!report::parse_flame_view(flags.view)) {
    throw UsageError(fmt::format(
        "--view '{}': expected growth-per-step, live-at-exit or live-at-peak", flags.view));
  }
}

std::vector<std::string> write_export_file(const TraceReports& reports,
                                           const analysis::AnalysisOptions& options,
                                           const ExportFlags& flags, bool all_frames,
                                           std::ostream& err) {
  report::ExportFormat format = *report::parse_export_format(flags.format);
  std::vector<const analysis::ProcessReport*> chosen;
  for (const analysis::ProcessReport& r : reports.processes) {
    if (flags.pid ? r.process.pid == *flags.pid : analysis::did_gpu_work(r)) chosen.push_back(&r);
  }
  if (chosen.empty()) {
    return {flags.pid ? fmt::format("no trace of process {} among the traces read", *flags.pid)
                      : std::string("no traced process did GPU work: nothing to export")};
  }
  if (chosen.size() > 1 && !report::holds_several_processes(format)) {
    std::string pids;
    for (const auto* r : chosen)
      pids += (pids.empty() ? "" : ", ") + std::to_string(r->process.pid);
    return {
        fmt::format("a {} file holds one process; these traces have {} ({}): choose one with --pid",
                    flags.format, chosen.size(), pids)};
  }
  // The second reading: the same analysis, asked to keep what the export
  // draws (analysis/export_detail.h).
  std::vector<analysis::ProcessReport> detailed;
  detailed.reserve(chosen.size());
  for (const analysis::ProcessReport* first : chosen) {
    analysis::AnalysisOptions again = options;
    again.export_request = report::export_request(format, *first);
    analysis::TraceReading read =
        analysis::read_trace_report(first->trace_path, again, "export this trace");
    if (!read.report) return {read.error};
    detailed.push_back(std::move(*read.report));
  }
  std::vector<const analysis::ProcessReport*> processes;
  processes.reserve(detailed.size());
  for (const auto& r : detailed) processes.push_back(&r);
  report::ExportOptions export_options;
  export_options.view = *report::parse_flame_view(flags.view);
  export_options.all_frames = all_frames;
  export_options.producer = std::string("gpuleak ") + kVersion;
  std::ostringstream content(std::ios::out | std::ios::binary);
  try {
    report::write_export(format, processes, export_options, content);
  } catch (const std::exception& e) {
    return {fmt::format("cannot write the {} export: {}", flags.format, e.what())};
  }
  if (format == report::ExportFormat::kFolded && content.str().empty()) {
    err << fmt::format(
        "gpuleak: the {} view has nothing to draw in these traces{}\n", flags.view,
        export_options.view == report::FlameView::kGrowthPerStep
            ? " (no site grows; --view live-at-exit or live-at-peak draws what was live)"
            : "");
  }
  std::string problem = flags.output == "-" ? write_stream(std::cout, content.str(), "stdout")
                                            : write_file_whole(flags.output, content.str());
  if (!problem.empty()) return {problem};
  if (flags.output != "-") {
    err << fmt::format("gpuleak: wrote {} ({} of {} process{})\n", flags.output, flags.format,
                       processes.size(), processes.size() == 1 ? "" : "es");
  }
  return {};
}

}  // namespace gpuleak::cli
