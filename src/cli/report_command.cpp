// gpuleak report TRACE...: the leak report from saved traces.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/command.h"
#include "cli/report_outputs.h"

namespace gpuleak::cli {

namespace {

struct ReportArguments {
  std::vector<std::string> traces;
  ReportFlags flags;
  bool fail_on_leak = false;
};

int run_report(const ReportArguments& args) {
  std::vector<std::string> files = trace_files(args.traces);
  analysis::AnalysisOptions options = analysis_options(args.flags);
  std::vector<analysis::ProcessReport> reports = analyze_traces(files, options);
  analysis::JobReport job = analyze_job_of(files, reports);
  bool json_on_stdout = args.flags.json_file == "-";
  write_outputs(reports, job, args.flags, json_on_stdout ? nullptr : &std::cout);
  // A damaged trace was reported up to the damage; say so once and fail.
  int status = kExitOk;
  for (const auto& r : reports) {
    if (!r.trace_error.empty()) {
      std::cerr << "gpuleak: " << r.trace_error << "\n";
      status = kExitInput;
    }
  }
  if (status == kExitOk && args.fail_on_leak &&
      (any_leak(reports) || analysis::has_process_findings(job)))
    status = kExitFindings;
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
  command->add_flag("--fail-on-leak", args->fail_on_leak,
                    "Exit with status 1 when anything leaked");
  command->callback([&action, args] { action = [args] { return run_report(*args); }; });
}

}  // namespace gpuleak::cli
