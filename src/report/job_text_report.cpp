// The job's part of the text report: every process in one line, then the
// process findings, then the per-process sections (text_report.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "analysis/processes/job_ranks.h"
#include "quantity/units.h"
#include "report/process_finding_text.h"
#include "report/text_report.h"
#include "report/text_words.h"

namespace gpuleak::report {

using quantity::format_duration_seconds;

namespace {

std::string exit_text(const analysis::JobReport& job) {
  if (!job.main_exit_s) return "";
  if (job.main_exit_status < 0) return "; the main program ended";
  if (job.main_exit_status > 128)
    return fmt::format("; the main program was ended by signal {}", job.main_exit_status - 128);
  return fmt::format("; the main program exited with status {}", job.main_exit_status);
}

}  // namespace

void write_job_text_report(std::ostream& out, const analysis::JobReport& job,
                           const std::vector<analysis::ProcessReport>& reports,
                           const TextOptions& options) {
  // A single trace of some earlier run: nothing to say about processes.
  if (!job.observed && job.processes.size() <= 1 && job.findings.empty()) {
    write_text_report(out, reports, options);
    return;
  }
  const analysis::JobProcess* main = nullptr;
  for (const auto& p : job.processes) {
    if (p.pid == job.main_pid && p.host == job.main_host) main = &p;
  }
  bool several_hosts = job_has_several_hosts(job);
  std::string main_name = main ? process_name(*main, job) : fmt::format("PID {}", job.main_pid);
  out << fmt::format("gpuleak: job of {}{}: {} {}{}, {}{}\n", main_name,
                     main ? " (" + shortened(main->command_line, 60) + ")" : "",
                     job.processes.size(), job.processes.size() == 1 ? "process" : "processes",
                     several_hosts ? " on several hosts" : "",
                     format_duration_seconds(job.duration_s), exit_text(job));
  std::size_t width = 0;
  for (const auto& p : job.processes) width = std::max(width, p.role.text.size());
  width = std::min<std::size_t>(width, 44);
  for (const auto& p : job.processes) {
    std::string line = fmt::format("  PID {:<8} {:<{}}  {}", p.pid, shortened(p.role.text, 44),
                                   width, process_memory_text(p));
    if (several_hosts) line = fmt::format("  {}{}", p.host.empty() ? "?" : p.host, line);
    if (p.first_use) {
      std::string where = first_use_text(*p.first_use);
      if (!where.empty()) line += "; CUDA first used at " + where;
    }
    if (p.alive_at_end) line += "; STILL RUNNING";
    out << line << '\n';
  }
  if (!job.nvml_note.empty()) out << "  Note: " << job.nvml_note << '\n';
  for (const auto& note : job.notes) out << "  Note: " << note << '\n';

  for (const auto& f : job.findings) {
    out << "\n  PROCESSES: " << finding_summary(f, job) << '\n';
    for (const auto& line : finding_details(f, job)) out << "    " << line << '\n';
    if (!f.fix.empty()) out << "    Fix: " << f.fix << '\n';
  }

  if (std::optional<analysis::JobRanks> ranks = analysis::job_ranks(reports)) {
    out << "\n  RANKS: " << analysis::job_ranks_text(*ranks) << '\n';
  }

  bool any_section = false;
  for (const auto& r : reports) any_section = any_section || analysis::did_gpu_work(r);
  if (!any_section) return;
  out << '\n';
  TextOptions sections = options;
  sections.sections_only_for_gpu_work = true;
  write_text_report(out, reports, sections);
}

}  // namespace gpuleak::report
