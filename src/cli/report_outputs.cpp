#include "cli/report_outputs.h"

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "analysis/processes/job_analysis.h"
#include "analysis/processes/process_samples.h"
#include "analysis/processes/process_verdict.h"
#include "analysis/trace_loader.h"
#include "cli/command.h"
#include "cli/progress.h"
#include "report/html_page_data.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/json_text.h"
#include "report/text_report.h"
#include "trace/trace_reader.h"

namespace gpuleak::cli {

namespace fs = std::filesystem;

void add_report_flags(CLI::App& command, ReportFlags& flags, bool json_to_stdout_flag) {
  command
      .add_option(
          "--suppressions", flags.suppressions_file,
          "File of rules for memory that is meant to live until exit (docs/suppressions.md)")
      ->check(CLI::ExistingFile);
  if (json_to_stdout_flag) {
    command.add_flag_callback(
        "--json", [&flags] { flags.json_file = "-"; },
        "Print the report as JSON (schema gpuleak-report/1) instead of text");
  }
  command.add_option("--json-report", flags.json_file, "Also write the JSON report to this file");
  command.add_option("--html", flags.html_file,
                     "Also write a self-contained HTML report to this file");
  command
      .add_option("--source-root", flags.source_root,
                  "Show source lines the trace does not carry, read from this checkout (regular "
                  "files inside it only)")
      ->check(CLI::ExistingDirectory);
  command.add_flag("--all-frames", flags.all_frames,
                   "Show frames inside CUDA, PyTorch and Python too");
  command
      .add_option("--warmup-steps", flags.warmup_steps,
                  "Steps ignored at the start before judging growth")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  command
      .add_option("--min-steps", flags.min_steps,
                  "Steps after warm-up needed before a LEAK verdict")
      ->capture_default_str()
      ->check(CLI::Range(8, 100000));
  command
      .add_option("--time-window", flags.time_window_s,
                  "Seconds per step for programs that report no steps")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
}

analysis::AnalysisOptions analysis_options(const ReportFlags& flags) {
  analysis::AnalysisOptions options;
  options.growth.warmup_steps = flags.warmup_steps;
  options.growth.min_steps = flags.min_steps;
  options.time_window_s = flags.time_window_s;
  if (!flags.source_root.empty()) {
    options.source_lookup.mode = analysis::SourceLookup::Mode::kCheckout;
    options.source_lookup.root = flags.source_root;
  }
  if (!flags.suppressions_file.empty()) {
    std::ifstream in(flags.suppressions_file);
    if (!in) throw InputError("cannot read suppressions file " + flags.suppressions_file);
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    if (!options.suppressions.parse(text.str(), &error)) {
      throw InputError("suppressions file " + flags.suppressions_file + ", " + error);
    }
  }
  return options;
}

std::vector<std::string> trace_files(const std::vector<std::string>& paths,
                                     std::vector<analysis::UnusableTrace>& unusable) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
      unusable.push_back({path, "cannot open " + path + ": no such file or directory"});
      continue;
    }
    if (!fs::is_directory(status)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    fs::directory_iterator it(path, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".trace") found.push_back(it->path().string());
    }
    if (ec) {
      unusable.push_back({path, "cannot list the folder " + path + ": " + ec.message()});
    } else if (found.empty()) {
      unusable.push_back({path, path + " holds no gpuleak traces (*.trace)"});
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

TraceReports analyze_traces(const std::vector<std::string>& files,
                            const analysis::AnalysisOptions& options,
                            std::vector<analysis::UnusableTrace> unusable) {
  std::uint64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    auto size = fs::file_size(f, ec);
    if (!ec) total += size;
  }
  Progress progress("Reading traces", total, Progress::Unit::kBytes);
  TraceReports reports;
  reports.unusable = std::move(unusable);
  std::uint64_t done_before = 0;
  for (const auto& file : files) {
    analysis::TraceReading read = analysis::read_trace_report(
        file, options, "read this trace",
        [&](std::uint64_t done, std::uint64_t) { progress.update(done_before + done); });
    if (read.report) {
      reports.processes.push_back(std::move(*read.report));
    } else {
      reports.unusable.push_back({file, read.error});
    }
    std::error_code ec;
    auto size = fs::file_size(file, ec);
    if (!ec) done_before += size;
  }
  progress.finish();
  return reports;
}

namespace {

std::string errno_sentence(int error) { return error ? std::strerror(error) : "write error"; }

}  // namespace

// Into PATH.partial first, then renamed, so a full disk never leaves a cut
// file that looks complete.
std::string write_file_whole(const std::string& path, const std::string& content) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  // Not a file to replace (/dev/stdout, a FIFO): written in place.
  bool in_place = !ec && fs::exists(status) && !fs::is_regular_file(status);
  std::string partial = in_place ? path : path + ".partial";
  int fd = in_place ? ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC)
                    : ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot write " + path + ": " + errno_sentence(errno);
  const char* p = content.data();
  std::size_t left = content.size();
  int error = 0;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno;
      break;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (!error && !in_place && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && !error) error = errno;
  if (!error && !in_place && ::rename(partial.c_str(), path.c_str()) != 0) error = errno;
  if (error) {
    if (!in_place) ::unlink(partial.c_str());
    return "cannot write " + path + ": " + errno_sentence(error);
  }
  return {};
}

// Writes to an already open stream and flushes it, so a full device is
// seen now (the final flush at exit would fail without a word).
std::string write_stream(std::ostream& out, const std::string& content, const char* name) {
  errno = 0;
  out << content;
  out.flush();
  if (!out) return std::string("cannot write the report to ") + name + ": " + errno_sentence(errno);
  return {};
}

std::vector<std::string> write_outputs(const TraceReports& reports, const analysis::JobReport& job,
                                       const ReportFlags& flags,
                                       const analysis::AnalysisOptions& options,
                                       std::ostream* text_stream) {
  std::vector<std::string> failed;
  auto keep = [&failed](std::string problem) {
    if (!problem.empty()) failed.push_back(std::move(problem));
  };
  if (text_stream) {
    report::TextOptions text;
    text.all_frames = flags.all_frames;
    std::ostringstream rendered;
    report::write_job_text_report(rendered, job, reports.processes, text);
    keep(write_stream(*text_stream, rendered.str(),
                      text_stream == &std::cerr ? "stderr" : "stdout"));
  }
  if (!flags.json_file.empty()) {
    std::string json =
        report::json_text(report::to_json(reports.processes, job, reports.unusable), 2) + "\n";
    if (flags.json_file == "-") {
      keep(write_stream(std::cout, json, "stdout"));
    } else {
      keep(write_file_whole(flags.json_file, json));
    }
  }
  if (!flags.html_file.empty()) {
    // The page's per-site chart and peak flame graph come from a second
    // reading of each trace (report/html_page_data.h); a trace that cannot
    // be read again keeps its first report.
    std::vector<analysis::ProcessReport> detailed = reports.processes;
    for (analysis::ProcessReport& r : detailed) {
      if (!analysis::did_gpu_work(r) || r.trace_path.empty()) continue;
      analysis::AnalysisOptions again = options;
      again.export_request = report::html_page_request(r);
      analysis::TraceReading read =
          analysis::read_trace_report(r.trace_path, again, "draw its page");
      if (read.report) r = std::move(*read.report);
    }
    std::ostringstream page;
    report::write_html_report(page, detailed, job, reports.unusable);
    keep(write_file_whole(flags.html_file, page.str()));
  }
  return failed;
}

analysis::JobReport analyze_job_of(const std::vector<std::string>& files,
                                   const std::vector<analysis::ProcessReport>& reports) {
  std::optional<analysis::JobObservations> observed;
  if (!files.empty()) {
    fs::path samples = fs::path(files.front()).parent_path() / analysis::kProcessSamplesFile;
    observed = analysis::read_process_samples(samples.string());
    // processes.jsonl covers the host of the traces beside it (a multi-node
    // job's other folders have their traces only).
    if (observed) {
      for (const analysis::ProcessReport& r : reports) {
        if (fs::path(r.trace_path).parent_path() == samples.parent_path()) {
          observed->host = r.process.hostname;
          break;
        }
      }
    }
    if (observed && observed->damaged_lines > 0) {
      std::cerr << "gpuleak: " << samples.string() << ": " << observed->damaged_lines
                << " damaged lines skipped\n";
    }
  }
  return analysis::analyze_job(reports, observed);
}

std::size_t print_trace_problems(const TraceReports& reports, std::ostream& err) {
  std::size_t count = 0;
  for (const auto& u : reports.unusable) {
    err << "gpuleak: " << u.error << "\n";
    ++count;
  }
  for (const auto& r : reports.processes) {
    if (!r.trace_error.empty()) {
      err << "gpuleak: " << r.trace_error << "\n";
      ++count;
    }
    for (const std::string& damage : r.damage) {
      err << "gpuleak: " << r.trace_path << ": " << damage << "\n";
      ++count;
    }
  }
  return count;
}

int fail_on_leak_status(const TraceReports& reports, const analysis::JobReport& job,
                        std::ostream& err) {
  bool leak = analysis::has_process_findings(job), incomplete = false;
  for (const auto& r : reports.processes) {
    analysis::ProcessVerdict verdict = analysis::judge_process(r);
    leak = leak || verdict.leak;
    if (!verdict.complete() && !verdict.leak) {
      incomplete = true;
      err << "gpuleak: " << r.trace_path << ": " << verdict.incomplete.front()
          << ", so --fail-on-leak cannot show that nothing leaked\n";
    }
  }
  if (leak) return kExitFindings;
  if (incomplete || !reports.unusable.empty()) return kExitInput;
  return kExitOk;
}

}  // namespace gpuleak::cli
