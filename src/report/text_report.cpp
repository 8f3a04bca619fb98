#include "report/text_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "report/holder_text.h"
#include "report/units.h"

namespace gpuleak::report {

using analysis::Frame;
using analysis::LeakGroup;
using analysis::ProcessReport;

namespace {

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string plural(std::uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string frame_text(const Frame& f) {
  std::string where;
  if (!f.file.empty()) {
    where = f.file + (f.line ? ":" + std::to_string(f.line) : "");
  } else if (!f.module.empty()) {
    where = base_name(f.module);
  }
  std::string function = f.function.empty() ? (f.language == Frame::Language::kNative
                                                   ? fmt::format("0x{:x}", f.address)
                                                   : std::string("?"))
                                            : f.function;
  if (function.size() > 70) function = function.substr(0, 67) + "...";
  if (f.inlined) function += " (inlined)";
  return where.empty() ? function : fmt::format("{:<34} {}", function, where);
}

void write_frames(std::ostream& out, const std::vector<Frame>& frames, const TextOptions& options,
                  const char* indent) {
  std::size_t shown = 0, hidden = 0;
  bool any_user = analysis::has_user_frame(frames);
  bool first = true;
  for (const Frame& f : frames) {
    if (!options.all_frames && analysis::folded_by_default(f, any_user)) {
      ++hidden;
      continue;
    }
    if (shown == options.max_frames) {
      ++hidden;
      continue;
    }
    out << indent << (first ? "at " : "   ") << frame_text(f) << '\n';
    first = false;
    ++shown;
  }
  if (frames.empty()) out << indent << "(no stack recorded)\n";
  if (hidden > 0)
    out << indent << "(" << plural(hidden, "more frame", "more frames")
        << " hidden; --all-frames shows them)\n";
}

void write_group(std::ostream& out, const LeakGroup& g, const TextOptions& options) {
  std::string device = g.device >= 0 ? fmt::format(" · GPU {}", g.device) : "";
  out << fmt::format("  {} in {}  [{} · {}{}]\n", format_bytes(g.bytes),
                     plural(g.allocations, "allocation", "allocations"),
                     trace::memory_kind_name(g.kind), g.api, device);
  write_frames(out, g.frames, options, "    ");
  if (!g.site.source_line.empty()) out << "    > " << g.site.source_line << '\n';
}

std::string process_title(const ProcessReport& r) {
  std::string command =
      r.process.command_line.empty() ? r.process.executable : r.process.command_line;
  if (command.size() > 80) command = command.substr(0, 77) + "...";
  return fmt::format("process {} ({})", r.process.pid, command);
}

void write_phases(std::ostream& out, const analysis::GrowthReport& g) {
  if (g.phases.size() < 2) return;
  out << "  Phases (each judged on its own iterations):\n";
  for (const analysis::PhaseSummary& p : g.phases) {
    std::string noun = iteration_noun(p.step_source);
    std::string verdict = analysis::verdict_name(p.verdict);
    if (p.verdict == analysis::Verdict::kLeak) {
      verdict += " " + format_rate(p.rate_bytes_per_step, noun.c_str());
    }
    out << fmt::format("    {}{}: {}, {}\n", p.primary ? "* " : "  ", p.name,
                       plural(p.steps, noun.c_str(), (noun + "s").c_str()), verdict);
  }
}

void write_growth(std::ostream& out, const ProcessReport& r) {
  const analysis::GrowthReport& g = r.growth;
  if (g.steps == 0) {
    if (!g.undecided_reason.empty()) out << "\n  Verdict: NOT YET (" << g.undecided_reason << ")\n";
    return;
  }
  std::string noun = iteration_noun(g.step_source);
  out << fmt::format("\n  Iterations: {} {}, first {} ignored as warm-up\n", g.steps,
                     g.phase.empty() ? g.step_source : g.phase, g.warmup_steps);
  if (!g.step_source_reason.empty()) {
    out << fmt::format("    ({}: {})\n", g.step_source, g.step_source_reason);
  }
  write_phases(out, g);
  switch (g.verdict) {
    case analysis::Verdict::kNotYet:
      out << "  Verdict: NOT YET ("
          << (g.undecided_reason.empty() ? "too few iterations after warm-up to decide"
                                         : g.undecided_reason)
          << ")\n";
      break;
    case analysis::Verdict::kNoLeak:
      out << "  Verdict: NO LEAK (no allocation site keeps growing)\n";
      break;
    case analysis::Verdict::kLeak: {
      out << fmt::format("  Verdict: LEAK {} since {} {}", format_rate(g.rate_bytes_per_step, noun.c_str()),
                         noun, g.first_growing_step.value_or(0));
      if (g.verdict_step) out << fmt::format(" (found at {} {})", noun, *g.verdict_step);
      if (g.rate_bytes_per_second > 0)
        out << fmt::format(", {}", format_rate(g.rate_bytes_per_second, "s"));
      out << '\n';
      if (g.seconds_to_full) {
        out << fmt::format("  Device full in ~{} at this rate (of {})\n",
                           format_duration_seconds(*g.seconds_to_full),
                           format_bytes(g.device_total_bytes.value_or(0)));
      }
      break;
    }
  }
  if (!g.cause.empty()) out << "  Cause: " << g.cause << ": " << g.cause_text << '\n';
  if (std::string holder = holder_text(g.holder_json); !holder.empty()) {
    out << "  Held by: " << holder << '\n';
  }
  if (!g.fix.empty()) out << "  Fix: " << g.fix << '\n';
  out << fmt::format("  Where: {}", analysis::where_name(g.where));
  out << fmt::format("; host memory {}",
                     g.host_rss_bytes_per_step > 0
                         ? "grows " + format_rate(g.host_rss_bytes_per_step, "step")
                         : std::string("does not grow"));
  out << '\n';
  if (!g.note.empty()) out << "  Note: " << g.note << '\n';
  for (const analysis::SiteGrowth& s : g.sites) {
    out << fmt::format(
        "\n  {} {} ({} allocations/{}, {} live now{}){}\n",
        s.bounded ? "Bounded growth" : "Growing", format_rate(s.rate_bytes_per_step, noun.c_str()),
        fmt::format("{:.1f}", s.allocations_per_step), noun, format_bytes(s.live_bytes),
        s.origin.empty() ? "" : ", " + s.origin, s.tensor_level ? "" : " [not a tensor]");
    TextOptions frames;
    write_frames(out, s.frames, frames, "    ");
    if (!s.site.source_line.empty()) out << "    > " << s.site.source_line << '\n';
  }
}

}  // namespace

std::string iteration_noun(const std::string& step_source) {
  if (step_source == "dataloader") return "batch";
  if (step_source == "allocation-period") return "iteration";
  if (step_source == "time-window") return "window";
  return "step";
}

std::string live_leak_message(const analysis::GrowthReport& g) {
  std::string noun = iteration_noun(g.step_source);
  std::string message = fmt::format("LEAK {} since {} {}", format_rate(g.rate_bytes_per_step, noun.c_str()),
                                    noun, g.first_growing_step.value_or(0));
  if (!g.phase.empty() && g.step_source != "optimizer-hook") message += " (" + g.phase + ")";
  if (!g.sites.empty()) {
    const auto& site = g.sites.front().site;
    message += " from " + site.label();
    if (!site.source_line.empty()) message += " `" + site.source_line + "`";
  }
  if (std::string holder = holder_text(g.holder_json); !holder.empty()) {
    message += "; held by " + holder;
  } else if (!g.cause.empty()) {
    message += "; " + g.cause;
  }
  if (g.seconds_to_full)
    message += "; device full in ~" + format_duration_seconds(*g.seconds_to_full) + " at this rate";
  if (!g.fix.empty()) message += "; fix: " + g.fix;
  return message;
}

void write_text_report(std::ostream& out, const std::vector<ProcessReport>& reports,
                       const TextOptions& options) {
  bool first = true;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const ProcessReport& r = reports[i];
    if (options.sections_only_for_gpu_work && !analysis::did_gpu_work(r)) continue;
    if (!first) out << '\n';
    first = false;
    out << "gpuleak: " << process_title(r)
        << fmt::format(", {:.1f} s, {}, {}\n", r.duration_s,
                       plural(r.allocations, "allocation", "allocations"),
                       plural(r.frees, "free", "frees"));
    if (!r.trace_error.empty()) out << "  Trace incomplete: " << r.trace_error << '\n';
    if (!r.exited && r.trace_error.empty()) {
      out << "  The process did not exit normally (killed?): live memory is as of its last flush\n";
    }
    if (r.lost_events)
      out << fmt::format("  {} events were dropped by the collector\n", r.lost_events);

    for (const auto& oom : r.out_of_memory) {
      out << fmt::format("\n  OUT OF MEMORY at {:.2f} s: {} of {} failed{} (CUDA error {})\n",
                         oom.time_s, oom.api, format_bytes(oom.requested_bytes),
                         oom.device >= 0 ? fmt::format(" on GPU {}", oom.device) : "", oom.result);
      write_frames(out, oom.frames, options, "    ");
      out << fmt::format("    live at that moment: {} in {}\n", format_bytes(oom.live_bytes),
                         plural(oom.live_allocations, "allocation", "allocations"));
      for (const LeakGroup& g : oom.largest_live) {
        out << fmt::format("      {} in {} at {}\n", format_bytes(g.bytes),
                           plural(g.allocations, "allocation", "allocations"), g.site.label());
      }
    }

    write_growth(out, r);

    const analysis::LeakSummary& leaks = r.leaks;
    if (leaks.allocations == 0) {
      out << "\n  No leaks: every allocation was freed before the process ended";
      if (leaks.suppressed_allocations) {
        out << fmt::format(" (apart from {} in {}, suppressed)",
                           format_bytes(leaks.suppressed_bytes),
                           plural(leaks.suppressed_allocations, "allocation", "allocations"));
      }
      out << ".\n";
      continue;
    }
    if (analysis::exit_memory_counts_as_leak(r)) {
      out << fmt::format("\n  LEAKED: {} in {} still allocated at exit, from {}:\n",
                         format_bytes(leaks.bytes),
                         plural(leaks.allocations, "allocation", "allocations"),
                         plural(leaks.groups.size(), "place", "places"));
    } else {
      out << fmt::format(
          "\n  Live at exit: {} in {}, from {} (PyTorch keeps its cache, cuBLAS workspaces and "
          "the tensors still referenced until the process ends: not a leak by itself; the "
          "verdict above says whether memory leaks):\n",
          format_bytes(leaks.bytes), plural(leaks.allocations, "allocation", "allocations"),
          plural(leaks.groups.size(), "place", "places"));
    }
    std::size_t shown = 0;
    for (const LeakGroup& g : leaks.groups) {
      if (shown++ == options.max_groups) {
        out << fmt::format("  ... and {} more places\n", leaks.groups.size() - options.max_groups);
        break;
      }
      out << '\n';
      write_group(out, g, options);
    }
    if (leaks.suppressed_allocations) {
      out << fmt::format("\n  Suppressed: {} in {}\n", format_bytes(leaks.suppressed_bytes),
                         plural(leaks.suppressed_allocations, "allocation", "allocations"));
    }
  }
}

}  // namespace gpuleak::report
