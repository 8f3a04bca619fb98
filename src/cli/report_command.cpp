// gpuleak report TRACE...: the leak report from saved traces.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <optional>

#include "cli/command.h"
#include "cli/report_export.h"
#include "cli/report_outputs.h"

namespace gpuleak::cli {

namespace {

struct ReportArguments {
  std::vector<std::string> traces;
  ReportFlags flags;
  ExportFlags export_flags;
  bool fail_on_leak = false;
  std::optional<std::uint64_t> tracked_block;  // --block
};

int run_report(const ReportArguments& args) {
  check_export_flags(args.export_flags);
  analysis::AnalysisOptions options = analysis_options(args.flags);
  options.tracked_block = args.tracked_block;
  std::vector<analysis::UnusableTrace> unusable;
  std::vector<std::string> files = trace_files(args.traces, unusable);
  TraceReports reports = analyze_traces(files, options, std::move(unusable));
  if (args.tracked_block && !reports.processes.empty() &&
      std::none_of(reports.processes.begin(), reports.processes.end(),
                   [](const auto& r) { return r.tracked_block && r.tracked_block->found; })) {
    throw InputError("no gpuleak.track() block " + std::to_string(*args.tracked_block) +
                     " in these traces");
  }
  analysis::JobReport job = analyze_job_of(files, reports.processes);
  bool exporting = !args.export_flags.format.empty();
  // The text report goes to stdout unless stdout is taken (--json, -o -);
  // with an export to a file it is still printed, so the reader sees the verdict.
  bool stdout_taken = args.flags.json_file == "-" || args.export_flags.output == "-";
  std::vector<std::string> not_written =
      write_outputs(reports, job, args.flags, options, stdout_taken ? nullptr : &std::cout);
  if (exporting) {
    std::vector<std::string> failed =
        write_export_file(reports, options, args.export_flags, args.flags.all_frames, std::cerr);
    not_written.insert(not_written.end(), failed.begin(), failed.end());
  }
  // Every problem once, on stderr; the readable traces are reported above.
  int status = kExitOk;
  if (print_trace_problems(reports, std::cerr) > 0) status = kExitInput;
  for (const std::string& problem : not_written) {
    std::cerr << "gpuleak: " << problem << "\n";
    status = kExitInput;
  }
  if (status == kExitOk && args.fail_on_leak) status = fail_on_leak_status(reports, job, std::cerr);
  return status;
}

}  // namespace

void add_report_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<ReportArguments>();
  CLI::App* command =
      app.add_subcommand("report", "Report leaks from saved traces (files or folders)");
  command->add_option("traces", args->traces, "Trace files (*.trace) or folders holding them")
      ->required();
  add_report_flags(*command, args->flags, /*json_to_stdout_flag=*/true);
  command->add_option("--format", args->export_flags.format,
                      "Export for another viewer: memory_viz, perfetto, speedscope, folded, pprof, "
                      "csv (docs/exports.md); needs -o");
  command->add_option("-o,--output", args->export_flags.output,
                      "File the export is written to (- for stdout)");
  command
      ->add_option("--view", args->export_flags.view,
                   "Flame graph of folded stacks: growth-per-step, live-at-exit or live-at-peak")
      ->capture_default_str();
  command->add_option("--pid", args->export_flags.pid,
                      "Export only this process (memory_viz holds one process)");
  command->add_option("--block", args->tracked_block,
                      "Report only block N of gpuleak.track() (its events; what it left "
                      "allocated at its end)");
  command->add_flag("--fail-on-leak", args->fail_on_leak,
                    "Exit with status 1 when anything leaked, 3 when data is missing (a CI gate)");
  command->callback([&action, args] { action = [args] { return run_report(*args); }; });
}

}  // namespace gpuleak::cli
