// What `gpuleak run` and `gpuleak report` share: the analysis flags, turning
// trace arguments into files, and writing the text/JSON/HTML outputs.
#pragma once

#include <string>
#include <vector>

#include "analysis/job_analysis.h"
#include "analysis/process_analysis.h"
#include "analysis/report_model.h"

namespace CLI {
class App;
}

namespace gpuleak::cli {

struct ReportFlags {
  std::string suppressions_file;
  std::string json_file;  // "-" for stdout
  std::string html_file;
  bool all_frames = false;
  std::uint64_t warmup_steps = 5;
  std::uint64_t min_steps = 40;
  double time_window_s = 1.0;
};

// Declares the shared flags on `command`.
void add_report_flags(CLI::App& command, ReportFlags& flags, bool json_to_stdout_flag);

// Builds the analysis options (reads and parses the suppressions file;
// throws InputError naming the file and line when it is unusable).
analysis::AnalysisOptions analysis_options(const ReportFlags& flags);

// Expands directories into the *.trace files they hold (sorted); throws
// InputError for a path that does not exist or holds no trace.
std::vector<std::string> trace_files(const std::vector<std::string>& paths);

// Reads every trace, with a progress line on a terminal. Unusable traces
// throw InputError; damaged ones are reported up to the damage.
std::vector<analysis::ProcessReport> analyze_traces(const std::vector<std::string>& files,
                                                    const analysis::AnalysisOptions& options);

// The job-level analysis of the traces, with `gpuleak run`'s process samples
// (processes.jsonl) from the folder of the first trace when they are there.
analysis::JobReport analyze_job_of(const std::vector<std::string>& files,
                                   const std::vector<analysis::ProcessReport>& reports);

// Writes the text report to `text_stream` (unless null) and the JSON/HTML
// files the flags ask for. Throws InputError when a file cannot be written.
void write_outputs(const std::vector<analysis::ProcessReport>& reports, const ReportFlags& flags,
                   std::ostream* text_stream);
// The same with the job: processes, roles, device memory, process findings.
void write_outputs(const std::vector<analysis::ProcessReport>& reports,
                   const analysis::JobReport& job, const ReportFlags& flags,
                   std::ostream* text_stream);

bool any_leak(const std::vector<analysis::ProcessReport>& reports);

}  // namespace gpuleak::cli
