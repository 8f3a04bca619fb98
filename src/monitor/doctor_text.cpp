#include "monitor/doctor_text.h"

#include <fmt/format.h>

#include "monitor/container_id.h"
#include "quantity/units.h"

namespace gpuleak::monitor {

namespace {

using quantity::format_bytes;

const char* severity_heading(Severity severity) {
  switch (severity) {
    case Severity::kAction:
      return "ACT";
    case Severity::kWarning:
      return "WARN";
    case Severity::kInfo:
      return "INFO";
  }
  return "INFO";
}

}  // namespace

std::string render_doctor_text(const DoctorReport& report, const KillRecord& kills) {
  const Sample& sample = report.sample;
  std::string out;
  auto line = [&](const std::string& text) { out += text + "\n"; };

  line("gpuleak doctor");
  if (!sample.nvml.available) {
    line("GPUs: " + sample.nvml.message);
  } else if (sample.devices.empty()) {
    line("GPUs: the driver reports none");
  }
  for (const auto& view : sample.devices) {
    const GpuDevice& d = view.device;
    line(fmt::format("GPU {}  {}  {}  {} of {} used, {} by {} listed process{}", d.index, d.name,
                     d.uuid, format_bytes(d.memory_used_bytes), format_bytes(d.memory_total_bytes),
                     format_bytes(view.accounted_bytes), d.processes.size(),
                     d.processes.size() == 1 ? "" : "es"));
  }
  out += "\n";
  if (sample.processes.empty()) {
    line(fmt::format("No process holds GPU memory or has {} open.", sample.device_file_glob));
  } else {
    line(fmt::format("{:>8} {:<16} {:<10} {:>10} {:>7}  {:<36} {}", "PID", "VERDICT", "USER",
                     "GPU MEM", "HANDLES", "RELATION", "COMMAND"));
    for (std::size_t i = 0; i < sample.processes.size(); ++i) {
      const ProcessView& view = sample.processes[i];
      std::string relation = view.relation.text;
      if (!view.info.container_id.empty()) {
        relation += (relation.empty() ? "" : ", ") + std::string("container ") +
                    short_container_id(view.info.container_id);
      }
      line(fmt::format(
          "{:>8} {:<16} {:<10} {:>10} {:>7}  {:<36} {}", view.pid, report.verdicts[i],
          view.user.substr(0, 10),
          view.gpu_memory_bytes ? format_bytes(*view.gpu_memory_bytes) : std::string("-"),
          view.visible ? std::to_string(view.info.device_handle_count) : std::string("?"), relation,
          view.visible ? view.info.command_line() : std::string("(not visible here)")));
    }
  }
  out += "\n";
  if (!report.gpu_memory_examined()) {
    // Without the driver nothing can be said about GPU memory: say so
    // rather than "no problems", which would read as a clean bill.
    line("GPU memory was not examined: " + sample.nvml.message);
    line(report.findings.empty()
             ? "Only /proc was checked, and it shows no problem; memory held on the GPUs, and "
               "memory no process accounts for, are unknown."
             : "The findings below come from /proc alone; memory held on the GPUs, and memory no "
               "process accounts for, are unknown.");
    out += "\n";
  } else if (report.findings.empty()) {
    line("No problems found: every GPU holder is alive, has a living parent and is accounted for.");
  }
  for (const auto& finding : report.findings) {
    line(fmt::format("[{}] {}", severity_heading(finding.severity), finding.summary));
    line("  Evidence:");
    for (const auto& evidence : finding.evidence) line("    - " + evidence);
    line("  Cause: " + finding.cause);
    line("  What to do: " + finding.action);
    out += "\n";
  }
  for (const auto& note : sample.notes) line("note: " + note);

  if (kills.requested) {
    out += "\n";
    line("--kill-orphans:");
    if (kills.candidates.empty()) line("  no orphaned process holds the GPU; nothing to end");
    for (const auto& candidate : kills.candidates) {
      if (!candidate.decision.allowed) {
        line(fmt::format("  not ending PID {} ({}): {}", candidate.target.pid,
                         candidate.target.description, candidate.decision.reason));
      }
    }
    if (!kills.refused.empty()) line("  " + kills.refused);
    for (const auto& entry : kills.log) line("  " + entry);
    for (const auto& outcome : kills.outcomes) line("  " + outcome.message);
  }
  return out;
}

}  // namespace gpuleak::monitor
