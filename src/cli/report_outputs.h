// What `gpuleak run` and `gpuleak report` share: the analysis flags, turning
// trace arguments into reports, writing the text/JSON/HTML outputs, and the
// exit status those give.
//
// One unusable file never hides the others: every trace that can be read is
// reported, and each one that cannot is named (UnusableTrace), with exit
// status 3. Outputs that cannot be written (a full disk, /dev/full) are
// errors too, never a silent success.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "analysis/model/report_model.h"
#include "analysis/process_analysis.h"
#include "analysis/processes/job_analysis.h"

namespace CLI {
class App;
}

namespace gpuleak::cli {

struct ReportFlags {
  std::string suppressions_file;
  std::string json_file;  // "-" for stdout
  std::string html_file;
  std::string source_root;  // --source-root: read source lines from this checkout
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

struct TraceReports {
  std::vector<analysis::ProcessReport> processes;
  std::vector<analysis::UnusableTrace> unusable;
};

// Expands directories into the *.trace files they hold (sorted); a path that
// does not exist, a folder that cannot be listed or holds no trace, becomes
// an unusable entry.
std::vector<std::string> trace_files(const std::vector<std::string>& paths,
                                     std::vector<analysis::UnusableTrace>& unusable);

// Reads every trace, with a progress line on a terminal. A trace that cannot
// be read at all becomes an unusable entry; damaged ones are reported up to
// the damage.
TraceReports analyze_traces(const std::vector<std::string>& files,
                            const analysis::AnalysisOptions& options,
                            std::vector<analysis::UnusableTrace> unusable = {});

// The job-level analysis of the traces, with `gpuleak run`'s process samples
// (processes.jsonl) from the folder of the first trace when they are there.
analysis::JobReport analyze_job_of(const std::vector<std::string>& files,
                                   const std::vector<analysis::ProcessReport>& reports);

// Writes the text report to `text_stream` (unless null) and the JSON/HTML
// outputs the flags ask for, with the job: processes, roles, device memory,
// process findings. `options` are those the reports were read with (the
// HTML page reads each trace again with them). Returns what could not be
// written, one sentence each (empty: all written). Files are written whole
// or not at all.
std::vector<std::string> write_outputs(const TraceReports& reports, const analysis::JobReport& job,
                                       const ReportFlags& flags,
                                       const analysis::AnalysisOptions& options,
                                       std::ostream* text_stream);

// Writes `content` to `path` whole (PATH.partial, then renamed), or in
// place when the path is not a regular file (/dev/stdout). Returns why it
// could not, or "".
std::string write_file_whole(const std::string& path, const std::string& content);

// Writes `content` to an open stream and flushes it, so a full device is
// seen now; returns why it could not ("... to NAME: ..."), or "".
std::string write_stream(std::ostream& out, const std::string& content, const char* name);

// Prints one "gpuleak: ..." line on `err` for every unusable trace, trace
// error and damage; returns how many.
std::size_t print_trace_problems(const TraceReports& reports, std::ostream& err);

// The process verdicts and the job's process findings as the CI gate
// (--fail-on-leak) sees them: kExitFindings when one leaks or a process
// finding was made, else kExitInput when data is missing from one (lost
// events), naming it on `err`, else kExitOk.
int fail_on_leak_status(const TraceReports& reports, const analysis::JobReport& job,
                        std::ostream& err);

}  // namespace gpuleak::cli
