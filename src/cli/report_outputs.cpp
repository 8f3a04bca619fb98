#include "cli/report_outputs.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/process_samples.h"
#include "analysis/trace_loader.h"
#include "cli/command.h"
#include "cli/progress.h"
#include "report/html_report.h"
#include "report/json_report.h"
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

std::vector<std::string> trace_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (ec || !fs::exists(status))
      throw InputError("cannot open " + path + ": no such file or directory");
    if (fs::is_directory(status)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (entry.path().extension() == ".trace") found.push_back(entry.path().string());
      }
      if (found.empty()) throw InputError(path + " holds no gpuleak traces (*.trace)");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(path);
    }
  }
  return files;
}

std::vector<analysis::ProcessReport> analyze_traces(const std::vector<std::string>& files,
                                                    const analysis::AnalysisOptions& options) {
  std::uint64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    total += fs::file_size(f, ec);
  }
  Progress progress("Reading traces", total, Progress::Unit::kBytes);
  std::vector<analysis::ProcessReport> reports;
  std::uint64_t done_before = 0;
  for (const auto& file : files) {
    try {
      reports.push_back(analysis::analyze_trace_file(
          file, options,
          [&](std::uint64_t done, std::uint64_t) { progress.update(done_before + done); }));
    } catch (const trace::TraceError& e) {
      progress.finish();
      throw InputError(e.what());
    }
    std::error_code ec;
    done_before += fs::file_size(file, ec);
  }
  progress.finish();
  return reports;
}

void write_outputs(const std::vector<analysis::ProcessReport>& reports, const ReportFlags& flags,
                   std::ostream* text_stream) {
  report::TextOptions text;
  text.all_frames = flags.all_frames;
  if (text_stream) report::write_text_report(*text_stream, reports, text);
  if (!flags.json_file.empty()) {
    std::string json = report::to_json(reports).dump(2) + "\n";
    if (flags.json_file == "-") {
      std::cout << json;
    } else {
      std::ofstream out(flags.json_file);
      if (!(out << json)) throw InputError("cannot write " + flags.json_file);
    }
  }
  if (!flags.html_file.empty()) {
    std::ofstream out(flags.html_file);
    if (!out) throw InputError("cannot write " + flags.html_file);
    report::write_html_report(out, reports);
    if (!out) throw InputError("cannot write " + flags.html_file);
  }
}

analysis::JobReport analyze_job_of(const std::vector<std::string>& files,
                                   const std::vector<analysis::ProcessReport>& reports) {
  std::optional<analysis::JobObservations> observed;
  if (!files.empty()) {
    fs::path samples = fs::path(files.front()).parent_path() / analysis::kProcessSamplesFile;
    observed = analysis::read_process_samples(samples.string());
    if (observed && observed->damaged_lines > 0) {
      std::cerr << "gpuleak: " << samples.string() << ": " << observed->damaged_lines
                << " damaged lines skipped\n";
    }
  }
  return analysis::analyze_job(reports, observed);
}

void write_outputs(const std::vector<analysis::ProcessReport>& reports,
                   const analysis::JobReport& job, const ReportFlags& flags,
                   std::ostream* text_stream) {
  report::TextOptions text;
  text.all_frames = flags.all_frames;
  if (text_stream) report::write_job_text_report(*text_stream, job, reports, text);
  if (!flags.json_file.empty()) {
    std::string json = report::to_json(reports, job).dump(2) + "\n";
    if (flags.json_file == "-") {
      std::cout << json;
    } else {
      std::ofstream out(flags.json_file);
      if (!(out << json)) throw InputError("cannot write " + flags.json_file);
    }
  }
  if (!flags.html_file.empty()) {
    std::ofstream out(flags.html_file);
    if (!out) throw InputError("cannot write " + flags.html_file);
    report::write_html_report(out, reports, job);
    if (!out) throw InputError("cannot write " + flags.html_file);
  }
}

bool any_leak(const std::vector<analysis::ProcessReport>& reports) {
  for (const auto& r : reports) {
    if ((analysis::exit_memory_counts_as_leak(r) && r.leaks.allocations > 0) ||
        r.growth.verdict == analysis::Verdict::kLeak)
      return true;
  }
  return false;
}

}  // namespace gpuleak::cli
