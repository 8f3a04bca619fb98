// gpuleak diff BEFORE AFTER: two runs compared, site by site (report/report_diff.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "cli/report_outputs.h"
#include "report/json_report.h"
#include "report/json_text.h"
#include "report/report_diff.h"

namespace gpuleak::cli {

namespace {

namespace fs = std::filesystem;

// A saved JSON report is read whole; one larger than this is no report
// gpuleak wrote for a run (a million-step run's is a few MiB).
constexpr std::uintmax_t kMaxReportBytes = 512ull * 1024 * 1024;

struct DiffArguments {
  std::string before, after;
  bool json = false;
  bool fail_on_new_growth = false;
  bool any_program = false;
  ReportFlags flags;  // how traces are analysed (warm-up, minimum steps)
};

bool is_json_report(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  if (fs::path(path).extension() == ".json") return true;
  std::ifstream in(path, std::ios::binary);
  char first = 0;
  while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  return first == '{';
}

// The side as a JSON report: read as one, or made from its traces.
nlohmann::json report_of(const std::string& path, const char* side,
                         const analysis::AnalysisOptions& options) {
  if (is_json_report(path)) {
    std::error_code ec;
    if (fs::file_size(path, ec) > kMaxReportBytes) {
      throw InputError(fmt::format("{} ({}): larger than any gpuleak report", path, side));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(fmt::format("cannot read {} ({})", path, side));
    try {
      return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{} ({}): not JSON: {}", path, side, e.what()));
    }
  }
  std::vector<analysis::UnusableTrace> unusable;
  std::vector<std::string> files = trace_files({path}, unusable);
  TraceReports reports = analyze_traces(files, options, std::move(unusable));
  if (reports.processes.empty()) {
    std::string why = reports.unusable.empty() ? "no trace" : reports.unusable.front().error;
    throw InputError(fmt::format("{} ({}): {}", path, side, why));
  }
  print_trace_problems(reports, std::cerr);
  analysis::JobReport job = analyze_job_of(files, reports.processes);
  return report::to_json(reports.processes, job, reports.unusable);
}

int run_diff(const DiffArguments& args) {
  analysis::AnalysisOptions options = analysis_options(args.flags);
  nlohmann::json before = report_of(args.before, "BEFORE", options);
  nlohmann::json after = report_of(args.after, "AFTER", options);
  report::RunDiff diff;
  try {
    diff = report::diff_reports(before, after);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  if (!diff.same_program && !args.any_program) {
    std::string programs;
    for (const auto& p : diff.processes) {
      if (p.program_before != p.program_after) {
        programs = fmt::format("BEFORE runs {}, AFTER runs {}", p.program_before, p.program_after);
        break;
      }
    }
    std::cerr << "gpuleak: these runs are of different programs (" << programs
              << "): sites would be compared across programs; --any-program compares them anyway\n";
    return kExitInput;
  }
  if (args.json) {
    std::cout << report::json_text(report::diff_json(diff), 2) << "\n";
  } else {
    report::write_diff_text(std::cout, diff);
  }
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "gpuleak: cannot write the comparison to stdout\n";
    return kExitInput;
  }
  if (args.fail_on_new_growth && diff.new_growth()) return kExitFindings;
  return kExitOk;
}

}  // namespace

void add_diff_command(CLI::App& app, CommandAction& action) {
  auto args = std::make_shared<DiffArguments>();
  CLI::App* command = app.add_subcommand(
      "diff",
      "Compare two runs: growing sites gone, new or changed (traces, folders or JSON reports)");
  command
      ->add_option("before", args->before, "The run before (a trace, a folder, or a JSON report)")
      ->required();
  command->add_option("after", args->after, "The run after")->required();
  command->add_flag("--json", args->json, "Print the comparison as JSON (schema gpuleak-diff/1)");
  command->add_flag("--fail-on-new-growth", args->fail_on_new_growth,
                    "Exit with status 1 when a site grows after that did not before, grows faster, "
                    "or the verdict became LEAK (a CI gate)");
  command->add_flag("--any-program", args->any_program,
                    "Compare runs of different programs (refused otherwise)");
  command
      ->add_option("--warmup-steps", args->flags.warmup_steps,
                   "Steps ignored at the start before judging growth (traces only)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  command
      ->add_option("--min-steps", args->flags.min_steps,
                   "Steps after warm-up needed before a LEAK verdict (traces only)")
      ->capture_default_str()
      ->check(CLI::Range(8, 100000));
  command->callback([&action, args] { action = [args] { return run_diff(*args); }; });
}

}  // namespace gpuleak::cli
