// Two runs compared (`gpuleak diff BEFORE AFTER`): did a fix remove the
// growth, did a change add a growing site. Both sides are JSON reports
// (schema gpuleak-report/1, report/json_report.h); traces are turned into
// one first, so a saved report and a fresh trace compare alike.
//
// Processes are paired by rank when both are ranks of a job, else in order
// of start among the processes that did GPU work; sites by file, function
// and line, then by file and function when the line moved.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace gpuleak::report {

struct SiteChange {
  enum class Kind { kGone, kNew, kFaster, kSlower, kSame };
  Kind kind = Kind::kSame;
  std::string label;  // "eval.py:61" (the after side's, when both have it)
  std::string function;
  std::optional<double> rate_before_bytes_per_step;  // growing there, at this rate
  std::optional<double> rate_after_bytes_per_step;
};
const char* site_change_name(SiteChange::Kind kind);  // "gone", "new", "faster", "slower", "same"

struct ProcessDiff {
  std::uint64_t pid_before = 0, pid_after = 0;
  std::string program_before, program_after;
  std::string verdict_before, verdict_after;  // "LEAK", "NO LEAK", "NOT YET"
  double rate_before_bytes_per_step = 0, rate_after_bytes_per_step = 0;
  std::vector<SiteChange> sites;  // growing on either side
};

struct RunDiff {
  std::vector<ProcessDiff> processes;
  std::vector<std::string> only_before, only_after;  // processes without a partner
  // Whether every pair runs the same program (executable and script).
  bool same_program = true;
  // A site grows after that did not before, or the verdict became LEAK.
  bool new_growth() const;
};

// Throws std::invalid_argument when a side is not a gpuleak report.
RunDiff diff_reports(const nlohmann::json& before, const nlohmann::json& after);

void write_diff_text(std::ostream& out, const RunDiff& diff);
nlohmann::json diff_json(const RunDiff& diff);

}  // namespace gpuleak::report
