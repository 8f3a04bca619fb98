#include "report/text_report.h"

#include <fmt/format.h>

#include <sstream>

#include "analysis/processes/process_verdict.h"
#include "quantity/units.h"
#include "report/file_names.h"
#include "report/holder_text.h"
#include "report/text_words.h"

namespace gpuleak::report {

using quantity::format_bytes;
using quantity::format_duration_seconds;
using quantity::format_rate;

using analysis::Frame;
using analysis::LeakGroup;
using analysis::ProcessReport;

namespace {

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

std::string process_heading(const ProcessReport& r) {
  std::string command =
      r.process.command_line.empty() ? r.process.executable : r.process.command_line;
  if (command.size() > 80) command = command.substr(0, 77) + "...";
  return fmt::format("process {} ({})", r.process.pid, command);
}

void write_phases(std::ostream& out, const analysis::GrowthReport& g) {
  if (g.phases.size() < 2) return;
  out << "  Phases (each judged on its own iterations):\n";
  for (const analysis::PhaseSummary& p : g.phases) {
    std::string noun = step_noun(p.step_source);
    std::string verdict = analysis::verdict_name(p.verdict);
    if (p.verdict == analysis::Verdict::kLeak) {
      verdict += " " + format_rate(p.rate_bytes_per_step, noun.c_str());
    }
    out << fmt::format("    {}{}: {}, {}\n", p.primary ? "* " : "  ", p.name,
                       plural(p.steps, noun.c_str(), (noun + "s").c_str()), verdict);
  }
}

// The one verdict (analysis/processes/process_verdict.h), on one line.
void write_verdict(std::ostream& out, const ProcessReport& r, const analysis::ProcessVerdict& v) {
  const analysis::GrowthReport& g = r.growth;
  out << "  Verdict: " << analysis::process_verdict_name(v.kind);
  switch (v.kind) {
    case analysis::ProcessVerdictKind::kLeak: {
      std::string noun = step_noun(g.step_source);
      out << fmt::format(" {} since {} {}", format_rate(g.rate_bytes_per_step, noun.c_str()), noun,
                         g.first_growing_step.value_or(0));
      if (g.verdict_step) out << fmt::format(" (found at {} {})", noun, *g.verdict_step);
      if (g.rate_bytes_per_second > 0)
        out << fmt::format(", {}", format_rate(g.rate_bytes_per_second, "s"));
      break;
    }
    case analysis::ProcessVerdictKind::kLeaked:
      out << fmt::format(": {} in {} still allocated at exit", format_bytes(r.leaks.bytes),
                         plural(r.leaks.allocations, "allocation", "allocations"));
      break;
    case analysis::ProcessVerdictKind::kNoLeak:
      if (g.pool_judged) {
        out << " (the pool's bytes in use do not keep growing)";
      } else if (g.steps > 0 && g.detection_floor_bytes_per_step) {
        std::string noun = step_noun(g.step_source);
        out << fmt::format(
            " (no allocation site keeps growing; this run would show one growing by {})",
            format_rate(*g.detection_floor_bytes_per_step, noun.c_str()));
      } else {
        out << (g.steps > 0 ? " (no allocation site keeps growing)"
                            : " (everything allocated was freed before the process exited)");
      }
      break;
    case analysis::ProcessVerdictKind::kNotYet:
      out << " ("
          << (!g.undecided_reason.empty() ? g.undecided_reason
              : g.steps > 0
                  ? std::string("too few iterations after warm-up to decide")
                  : std::string("no steps or time windows were recorded, and the process did not "
                                "exit normally"))
          << ")";
      break;
    case analysis::ProcessVerdictKind::kIncomplete:
      out << " (no leak among the recorded events, but data is missing, so this is no clean bill)";
      break;
  }
  if (!v.complete() && v.kind != analysis::ProcessVerdictKind::kIncomplete)
    out << "; data is missing (below)";
  out << '\n';
}

// NOT YET for too few steps, with sites that rose at every test but the
// number of steps: where to look, said as what it is (not a verdict).
void write_rising_sites(std::ostream& out, const analysis::GrowthReport& g,
                        const std::string& noun) {
  if (g.rising_sites.empty()) return;
  std::uint64_t judged = g.steps > g.warmup_steps ? g.steps - g.warmup_steps : 0;
  out << fmt::format(
      "\n  Rising so far, not yet a verdict ({} {}s after warm-up; memory that fills a cache for "
      "a while rises the same way, so a verdict waits for more):\n",
      judged, noun);
  // Where to look, not a list to read: the fastest few (the JSON has all).
  constexpr std::size_t kShown = 3;
  for (std::size_t i = 0; i < g.rising_sites.size() && i < kShown; ++i) {
    const analysis::SiteGrowth& s = g.rising_sites[i];
    out << fmt::format("\n  Rising {} ({} allocations/{}, {} at the last {}{}){}\n",
                       format_rate(s.rate_bytes_per_step, noun.c_str()),
                       fmt::format("{:.1f}", s.allocations_per_step), noun,
                       format_bytes(s.live_bytes), noun, s.origin.empty() ? "" : ", " + s.origin,
                       s.tensor_level ? "" : " [not a tensor]");
    TextOptions frames;
    write_frames(out, s.frames, frames, "    ");
    if (!s.site.source_line.empty()) out << "    > " << s.site.source_line << '\n';
  }
  if (g.rising_sites.size() > kShown) {
    std::size_t more = g.rising_sites.size() - kShown;
    out << fmt::format("\n  ({} more {} rising more slowly; --json lists them all)\n", more,
                       more == 1 ? "site" : "sites");
  }
}

void write_growth(std::ostream& out, const ProcessReport& r) {
  const analysis::GrowthReport& g = r.growth;
  if (g.steps == 0) return;  // the Verdict line says why nothing was judged
  std::string noun = step_noun(g.step_source);
  out << fmt::format("\n  Iterations: {} {}, first {} ignored as warm-up\n", g.steps,
                     g.phase.empty() ? g.step_source : g.phase, g.warmup_steps);
  if (!g.step_source_reason.empty()) {
    out << fmt::format("    ({}: {})\n", g.step_source, g.step_source_reason);
  }
  write_phases(out, g);
  // The verdict itself is the Verdict line at the top (one verdict for
  // every output: analysis/processes/process_verdict.h).
  if (g.verdict == analysis::Verdict::kLeak && g.seconds_to_full) {
    out << fmt::format("  Device full in ~{} at this rate (of {})\n",
                       format_duration_seconds(*g.seconds_to_full),
                       format_bytes(g.device_total_bytes.value_or(0)));
  }
  if (std::string kept = kept_at_text(g.holder); !kept.empty()) {
    out << "  Kept at: " << kept << '\n';
  }
  // Before a verdict, a cause is what a rise would be if it goes on.
  const char* hedge = g.rising_sites.empty() ? "" : ", if it keeps rising";
  if (!g.cause.empty())
    out << "  Cause" << hedge << ": " << g.cause << ": " << g.cause_text << '\n';
  if (std::string holder = holder_text(g.holder); !holder.empty()) {
    out << "  Held by: " << holder << '\n';
  }
  if (!g.fix.empty()) out << "  Fix" << hedge << ": " << g.fix << '\n';
  out << fmt::format("  Where: {}", analysis::where_name(g.where));
  out << fmt::format("; host memory {}",
                     g.host_rss_bytes_per_step > 0
                         ? "grows " + format_rate(g.host_rss_bytes_per_step, "step")
                         : std::string("does not grow"));
  out << '\n';
  if (!g.note.empty()) out << "  Note: " << g.note << '\n';
  for (const analysis::SiteGrowth& s : g.sites) {
    if (s.grew_until_step) {
      out << fmt::format(
          "\n  Grew from step {} until step {}, flat for {} steps since ({} held{}){}\n",
          s.first_growing_step, *s.grew_until_step, s.flat_steps, format_bytes(s.live_bytes),
          s.origin.empty() ? "" : ", " + s.origin, s.tensor_level ? "" : " [not a tensor]");
      TextOptions frames;
      write_frames(out, s.frames, frames, "    ");
      if (!s.site.source_line.empty()) out << "    > " << s.site.source_line << '\n';
      continue;
    }
    out << fmt::format(
        "\n  {} {} ({} allocations/{}, {} live now{}){}\n",
        s.bounded ? "Bounded growth" : "Growing", format_rate(s.rate_bytes_per_step, noun.c_str()),
        fmt::format("{:.1f}", s.allocations_per_step), noun, format_bytes(s.live_bytes),
        s.origin.empty() ? "" : ", " + s.origin, s.tensor_level ? "" : " [not a tensor]");
    TextOptions frames;
    if (s.site_id == analysis::kPoolSiteId) {
      // The pool's level has no stack: say which loop it grew in.
      out << "    in the loop "
          << (s.site.file.empty() ? std::string("of the program") : "at " + s.site.label())
          << (s.site.function.empty() ? "" : " in " + s.site.function)
          << "; the arrays inside the pool are not seen one by one\n";
      continue;
    }
    write_frames(out, s.frames, frames, "    ");
    if (!s.site.source_line.empty()) out << "    > " << s.site.source_line << '\n';
    if (!s.site.backward_node.empty())
      out << "    (allocated by the backward pass, in " << s.site.backward_node << ")\n";
  }
  write_rising_sites(out, g, noun);
}

}  // namespace

std::string step_noun(const std::string& step_source) {
  if (step_source == "dataloader") return "batch";
  if (step_source == "allocation-period") return "iteration";
  if (step_source == "python-loop") return "iteration";
  if (step_source == "time-window") return "window";
  return "step";
}

std::string live_leak_message(const analysis::GrowthReport& g) {
  std::string noun = step_noun(g.step_source);
  std::string message =
      fmt::format("LEAK {} {}", format_rate(g.rate_bytes_per_step, noun.c_str()),
                  growth_start_text(g.first_growing_step.value_or(0), g.warmup_steps, noun));
  if (!g.phase.empty() && g.step_source != "optimizer-hook") message += " (" + g.phase + ")";
  std::string allocated;
  if (!g.sites.empty()) {
    const auto& site = g.sites.front().site;
    allocated = site.label();
    if (!site.source_line.empty()) allocated += " `" + site.source_line + "`";
    if (!site.backward_node.empty()) allocated += " (backward pass, " + site.backward_node + ")";
  }
  // The statement to change comes first; the allocation second.
  if (std::string kept = kept_at_text(g.holder); !kept.empty()) {
    message += ": kept at " + kept;
    if (!allocated.empty()) message += " -- allocated at " + allocated;
    if (std::string holder = holder_text(g.holder); !holder.empty())
      message += "; held by " + holder;
  } else {
    if (!allocated.empty()) message += " from " + allocated;
    if (std::string holder = holder_text(g.holder); !holder.empty()) {
      message += "; held by " + holder;
    } else if (!g.cause.empty()) {
      message += "; " + g.cause;
    }
  }
  if (g.seconds_to_full)
    message += "; device full in ~" + format_duration_seconds(*g.seconds_to_full) + " at this rate";
  if (!g.fix.empty()) message += "; fix: " + g.fix;
  return message;
}

namespace {

// How driver calls were captured, and anything that hid allocations.
void write_capture_facts(std::ostream& out, const ProcessReport& r) {
  if (!r.collector_disabled.empty()) {
    out << "  The collector turned itself off (" << r.collector_disabled
        << "): nothing after that was recorded, so this report cannot call the run clean\n";
  }
  if (r.capture_backend && r.capture_backend->name && !r.capture_backend->name->empty()) {
    std::string reason = r.capture_backend->reason.value_or("");
    out << "  Driver calls captured by: " << *r.capture_backend->name
        << (reason.empty() ? "" : " (" + reason + ")") << '\n';
  }
  if (r.framework_tracking && r.framework_tracking->hidden_allocations.value_or(false)) {
    std::string name = r.framework_tracking->framework.value_or("");
    out << "  " << (name.empty() ? std::string("The framework") : name)
        << " allocates from a pool it reserved at start, so its arrays are invisible to the "
           "driver";
    std::string how = r.framework_tracking->how_to_see.value_or("");
    if (!how.empty()) out << "; to see each array, run with " << how;
    out << '\n';
  }
}

// Names, paths and source text come from the traced program: a control
// character in them (an escape sequence) must not reach the terminal as one.
std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && c != '\n' && c != '\t') || b == 0x7f) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

void write_reports(std::ostream& out, const std::vector<ProcessReport>& reports,
                   const TextOptions& options) {
  bool first = true;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const ProcessReport& r = reports[i];
    if (options.sections_only_for_gpu_work && !analysis::did_gpu_work(r)) continue;
    if (!first) out << '\n';
    first = false;
    out << "gpuleak: " << process_heading(r)
        << fmt::format(", {:.1f} s, {}, {}\n", r.duration_s,
                       plural(r.allocations, "allocation", "allocations"),
                       plural(r.frees, "free", "frees"));
    analysis::ProcessVerdict verdict = analysis::judge_process(r);
    write_verdict(out, r, verdict);
    if (!r.trace_error.empty()) out << "  Trace incomplete: " << r.trace_error << '\n';
    for (const std::string& damage : r.damage) out << "  Trace damaged: " << damage << '\n';
    if (r.attach) {
      out << "  Recorded by gpuleak attach from the moment it joined"
          << (r.attach->detached && !r.exited ? " until it detached; the process kept running" : "")
          << ": memory allocated before has no stack";
      if (r.attach->baseline_torch_allocated_bytes)
        out << fmt::format(
            " (PyTorch held {} then)",
            format_bytes(static_cast<std::uint64_t>(*r.attach->baseline_torch_allocated_bytes)));
      out << '\n';
    }
    if (!r.exited && r.trace_error.empty() && !(r.attach && r.attach->detached)) {
      out << "  The process did not exit normally (killed?): live memory is as of its last flush\n";
    }
    if (r.lost_events) {
      out << fmt::format(
          "  {} lost by the collector (it never blocks the program), so allocations or frees "
          "may be missing and the counts below may be wrong\n",
          plural(r.lost_events, "event was", "events were"));
    }
    if (r.compaction) {
      const auto& c = *r.compaction;
      out << fmt::format(
          "  Trace compacted to stay under {} ({}): the {:.1f} s before the last compaction are "
          "a summary (what was live then, with its sites; {} of {}, one kept every {}), the "
          "growth verdict is judged on the raw events after it\n",
          format_bytes(c.bound_bytes), plural(c.compactions, "time", "times"), c.summarized_until_s,
          plural(c.steps.size(), "step mark", "step marks"), c.summarized_steps, c.step_resolution);
    }
    write_capture_facts(out, r);

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
    if (leaks.allocations == 0 && !verdict.complete()) {
      out << "\n  Nothing is still allocated among the recorded events; data is missing, so this "
             "does not show that nothing leaked.\n";
      continue;
    }
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
    } else if (!analysis::ended_while_recorded(r)) {
      out << fmt::format(
          "\n  Live when gpuleak detached: {} in {}, from {} (allocated while it was attached and "
          "still in use then; the verdict above says whether memory leaks):\n",
          format_bytes(leaks.bytes), plural(leaks.allocations, "allocation", "allocations"),
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

}  // namespace

void write_text_report(std::ostream& out, const std::vector<ProcessReport>& reports,
                       const TextOptions& options) {
  std::ostringstream text;
  write_reports(text, reports, options);
  out << printable(text.str());
}

}  // namespace gpuleak::report
