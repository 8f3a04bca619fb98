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
  analysis::AnalysisOptions options = analysis_options(args.flags);
  std::vector<analysis::UnusableTrace> unusable;
  std::vector<std::string> files = trace_files(args.traces, unusable);
  TraceReports reports = analyze_traces(files, options, std::move(unusable));
  analysis::JobReport job = analyze_job_of(files, reports.processes);
  bool json_on_stdout = args.flags.json_file == "-";
  std::vector<std::string> not_written =
      write_outputs(reports, job, args.flags, json_on_stdout ? nullptr : &std::cout);
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
  command->add_flag("--fail-on-leak", args->fail_on_leak,
                    "Exit with status 1 when anything leaked, 3 when data is missing (a CI gate)");
  command->callback([&action, args] { action = [args] { return run_report(*args); }; });
}

}  // namespace gpuleak::cli
