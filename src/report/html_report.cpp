// The HTML report: one self-contained page.
//
// gpuleak writes every text of the page here, HTML-escaped, so it reads the
// same without JavaScript. The JSON report (schema gpuleak-report/1) is
// embedded as data in a <script type="application/json"> block, with '<',
// '>' and '&' written as \u escapes so no string in it can end the block.
// uPlot and the page's own script and style (src/report/html/) are inlined
// from a header generated at build time; the script reads the data block and
// draws the timelines. A Content-Security-Policy allows exactly those two
// scripts (by SHA-256) and no network access of any kind.
#include "report/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string_view>

#include "analysis/processes/job_ranks.h"
#include "analysis/processes/process_verdict.h"
#include "generated/html_report_assets.h"
#include "quantity/units.h"
#include "report/file_names.h"
#include "report/holder_text.h"
#include "report/html_page_data.h"
#include "report/json_report.h"
#include "report/json_text.h"
#include "report/process_finding_text.h"
#include "report/text_words.h"

namespace gpuleak::report {

using quantity::format_bytes;
using quantity::format_duration_seconds;
using quantity::format_rate;

using analysis::Frame;
using analysis::LeakGroup;
using analysis::ProcessReport;
using analysis::Verdict;

namespace {

namespace assets = html_assets;

constexpr std::size_t kMaxGroupsShown = 100;
constexpr std::size_t kMaxFunctionChars = 240;
constexpr std::size_t kMaxCommandChars = 80;

// Text for element content and quoted attribute values. Bytes that are not
// UTF-8 (names from the traced program are bytes) become U+FFFD, so the page
// stays valid UTF-8; the embedded JSON keeps the exact bytes.
std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (std::size_t i = 0; i < text.size();) {
    char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      std::size_t n = utf8_sequence_bytes(text, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The JSON report as the content of a <script type="application/json">.
// '<', '>' and '&' occur in JSON only inside strings, where \u003c etc. mean
// the same characters, so "</script>" or "<!--" in a name cannot end the
// block. Bytes that are not UTF-8 are \udcXX escapes (report/json_text.h).
std::string script_safe_json(const nlohmann::json& data) {
  std::string text = json_text(data);
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

// At most `max_chars` bytes, cut on a UTF-8 character boundary.
std::string command_of(const ProcessReport& r) {
  std::string command =
      r.process.command_line.empty() ? r.process.executable : r.process.command_line;
  return command.empty() ? fmt::format("pid {}", r.process.pid) : command;
}

std::string utc_time(std::uint64_t unix_ns) {
  auto seconds = static_cast<std::time_t>(unix_ns / 1000000000ULL);
  std::tm tm{};
  if (!gmtime_r(&seconds, &tm)) return {};
  char text[32];
  if (std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) return {};
  return text;
}

const char* verdict_class(analysis::ProcessVerdictKind kind) {
  switch (kind) {
    case analysis::ProcessVerdictKind::kLeak:
    case analysis::ProcessVerdictKind::kLeaked:
      return "leak";
    case analysis::ProcessVerdictKind::kNoLeak:
      return "noleak";
    case analysis::ProcessVerdictKind::kNotYet:
      return "notyet";
    case analysis::ProcessVerdictKind::kIncomplete:
      return "incomplete";
  }
  return "notyet";
}

// "rank 3 of 8 (local rank 1)" from the distributed annotation; empty if none.
std::string rank_text(const std::optional<analysis::DistributedRank>& distributed) {
  if (!distributed || !distributed->rank) return {};
  std::string text = fmt::format("rank {}", *distributed->rank);
  if (distributed->world_size) text += fmt::format(" of {}", *distributed->world_size);
  if (distributed->local_rank) text += fmt::format(" (local rank {})", *distributed->local_rank);
  return text;
}

class PageWriter {
 public:
  PageWriter(std::ostream& out, const std::vector<analysis::UnusableTrace>& unusable)
      : out_(out), unusable_(unusable) {}

  void write(const std::vector<ProcessReport>& reports, const analysis::JobReport* job = nullptr) {
    write_head(reports);
    out_ << "<body>\n<header>\n<h1>" << escape(page_title(reports)) << "</h1>\n";
    out_ << "<p class=\"gl-subtitle\">gpuleak memory report: "
         << escape(plural(reports.size(), "process", "processes"))
         << ". This page is self-contained and works offline.</p>\n"
         << "<p class=\"gl-filter\"><label>Filter by file or function: <input type=\"search\" "
            "id=\"gl-filter\" placeholder=\"train.py, forward, ...\"></label></p>\n</header>\n";
    out_ << "<noscript><p class=\"gl-warning\">The memory timelines are drawn by the page's "
            "script; everything else is shown without it.</p></noscript>\n";
    for (const analysis::UnusableTrace& u : unusable_) {
      out_ << "<p class=\"gl-warning\">No report for a trace: " << escape(u.error) << ".</p>\n";
    }
    if (reports.empty() && unusable_.empty())
      out_ << "<p>No trace was given, so there is nothing to report.</p>\n";
    if (std::optional<analysis::JobRanks> ranks = analysis::job_ranks(reports)) {
      ranks_ = analysis::job_ranks_text(*ranks);
    }
    if (job) write_job(*job);
    if (reports.size() > 1) write_summary(reports);
    for (std::size_t i = 0; i < reports.size(); ++i) {
      if (job && !analysis::did_gpu_work(reports[i])) continue;  // one line in the job's table
      write_process(i, reports[i]);
    }
    out_ << "<footer><p class=\"gl-muted\">The report's data (schema " << escape(kReportSchema)
         << ") is embedded in this page as the JSON block with id "
            "<code>gpuleak-data</code>.</p></footer>\n";
    out_ << "<script type=\"application/json\" id=\"gpuleak-data\">"
         << script_safe_json(page_data(reports, job)) << "</script>\n";
    out_ << "<script>" << assets::kUplotJs << "</script>\n";
    out_ << "<script>" << assets::kD3Js << "</script>\n";
    out_ << "<script>" << assets::kFlamegraphJs << "</script>\n";
    out_ << "<script>" << assets::kPageJs << "</script>\n";
    out_ << "</body>\n</html>\n";
  }

 private:
  // The JSON report, and per process what the script draws beyond it
  // (html_page_data.h) under "page".
  nlohmann::json page_data(const std::vector<ProcessReport>& reports,
                           const analysis::JobReport* job) const {
    nlohmann::json data = job ? to_json(reports, *job, unusable_) : to_json(reports, unusable_);
    for (std::size_t i = 0; i < reports.size() && i < data["processes"].size(); ++i) {
      data["processes"][i]["page"] = html_page_data(reports[i]);
    }
    return data;
  }

  static std::string page_title(const std::vector<ProcessReport>& reports) {
    if (reports.size() == 1) {
      return fmt::format("gpuleak report: {} (pid {})",
                         shortened(command_of(reports[0]), kMaxCommandChars),
                         reports[0].process.pid);
    }
    if (reports.empty()) return "gpuleak report: no processes";
    std::string pids;
    for (std::size_t i = 0; i < reports.size() && i < 8; ++i)
      pids += (i ? ", " : "") + std::to_string(reports[i].process.pid);
    if (reports.size() > 8) pids += ", ...";
    return fmt::format("gpuleak report: {} (pids {})",
                       plural(reports.size(), "process", "processes"), pids);
  }

  void write_head(const std::vector<ProcessReport>& reports) {
    out_ << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    out_ << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    // Nothing may be fetched: no network, no file; only our four scripts run.
    out_ << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         << "script-src 'sha256-" << assets::kUplotJsSha256 << "' 'sha256-" << assets::kD3JsSha256
         << "' 'sha256-" << assets::kFlamegraphJsSha256 << "' 'sha256-" << assets::kPageJsSha256
         << "'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
            "form-action 'none'\">\n";
    out_ << "<title>" << escape(page_title(reports)) << "</title>\n";
    out_ << "<link rel=\"icon\" href=\"data:,\">\n";
    out_ << "<style>" << assets::kUplotCss << "</style>\n";
    out_ << "<style>" << assets::kFlamegraphCss << "</style>\n";
    out_ << "<style>" << assets::kPageCss << "</style>\n";
    out_ << "</head>\n";
  }

  void write_summary(const std::vector<ProcessReport>& reports) {
    bool any_rank = std::any_of(reports.begin(), reports.end(), [](const ProcessReport& r) {
      return !rank_text(r.distributed).empty();
    });
    out_ << "<table class=\"gl-summary\">\n<thead><tr><th>Process</th><th>Parent</th>"
         << (any_rank ? "<th>Rank</th>" : "")
         << "<th>Command</th><th>Verdict</th><th>Growth</th><th>Still allocated at exit</th>"
            "<th>Peak live</th><th>Out of memory</th><th>Duration</th></tr></thead>\n<tbody>\n";
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const ProcessReport& r = reports[i];
      const analysis::GrowthReport& g = r.growth;
      out_ << "<tr><td><a href=\"#process-" << i << "\">" << r.process.pid << "</a></td>";
      out_ << "<td>" << r.process.parent_pid << "</td>";
      if (any_rank) out_ << "<td>" << escape(rank_text(r.distributed)) << "</td>";
      out_ << "<td><code>" << escape(shortened(command_of(r), kMaxCommandChars)) << "</code></td>";
      analysis::ProcessVerdict verdict = analysis::judge_process(r);
      out_ << "<td><span class=\"gl-badge gl-badge-" << verdict_class(verdict.kind) << "\">"
           << analysis::process_verdict_name(verdict.kind) << "</span></td>";
      out_ << "<td class=\"gl-number\">"
           << (g.verdict == Verdict::kLeak ? escape(format_rate(g.rate_bytes_per_step, "step"))
                                           : std::string("&ndash;"))
           << "</td>";
      out_ << "<td class=\"gl-number\">"
           << (r.leaks.allocations == 0
                   ? std::string("nothing")
                   : escape(fmt::format("{} in {}", format_bytes(r.leaks.bytes),
                                        plural(r.leaks.allocations, "allocation", "allocations"))))
           << "</td>";
      out_ << "<td class=\"gl-number\">" << escape(format_bytes(r.peak_live_bytes)) << "</td>";
      out_ << "<td class=\"gl-number\">" << r.out_of_memory.size() << "</td>";
      out_ << "<td class=\"gl-number\">" << escape(format_duration_seconds(r.duration_s))
           << "</td></tr>\n";
    }
    out_ << "</tbody>\n</table>\n";
  }

  // Every process of the job in one row, then the process findings.
  void write_job(const analysis::JobReport& job) {
    out_ << "<section class=\"gl-job\" id=\"job\">\n<h2>Processes of the job</h2>\n";
    if (ranks_)
      out_ << "<p class=\"gl-ranks\"><span class=\"gl-label\">Ranks:</span> " << escape(*ranks_)
           << "</p>\n";
    out_ << "<table class=\"gl-processes\">\n<thead><tr><th>Process</th><th>Role</th>"
            "<th>Device memory (as the driver counts it)</th><th>CUDA first used at</th>"
            "</tr></thead>\n<tbody>\n";
    for (const analysis::JobProcess& p : job.processes) {
      out_ << "<tr><td>";
      if (p.report_index >= 0 && p.gpu_work) {
        out_ << "<a href=\"#process-" << p.report_index << "\">" << p.pid << "</a>";
      } else {
        out_ << p.pid;
      }
      out_ << "</td><td>" << escape(p.role.text) << (p.alive_at_end ? " (still running)" : "")
           << "</td><td>" << escape(process_memory_text(p)) << "</td><td>"
           << (p.first_use ? "<code>" + escape(first_use_text(*p.first_use)) + "</code>"
                           : std::string("&ndash;"))
           << "</td></tr>\n";
    }
    out_ << "</tbody>\n</table>\n";
    if (!job.nvml_note.empty())
      out_ << "<p class=\"gl-muted\">" << escape(job.nvml_note) << "</p>\n";
    for (const std::string& note : job.notes)
      out_ << "<p class=\"gl-muted\">" << escape(note) << "</p>\n";
    for (const analysis::ProcessFinding& f : job.findings) {
      out_ << "<div class=\"gl-finding gl-process-finding\" data-kind=\"" << escape(f.kind)
           << "\">\n<h3>" << escape(finding_title(f.kind)) << "</h3>\n<p>"
           << escape(finding_summary(f, job)) << "</p>\n<ul>\n";
      for (const std::string& line : finding_details(f, job))
        out_ << "<li>" << escape(line) << "</li>\n";
      out_ << "</ul>\n";
      if (!f.fix.empty()) out_ << "<p><strong>Fix:</strong> " << escape(f.fix) << "</p>\n";
      out_ << "</div>\n";
    }
    out_ << "</section>\n";
  }

  void fact(const char* name, const std::string& value) {
    if (value.empty()) return;
    out_ << "<dt>" << name << "</dt><dd>" << escape(value) << "</dd>\n";
  }

  void write_process(std::size_t index, const ProcessReport& r) {
    out_ << "<section class=\"gl-process\" id=\"process-" << index << "\">\n";
    out_ << "<h2>Process " << r.process.pid << " <span class=\"gl-muted\">"
         << escape(shortened(command_of(r), kMaxCommandChars)) << "</span></h2>\n";

    out_ << "<dl class=\"gl-facts\">\n";
    fact("Command", r.process.command_line);
    if (r.process.executable != r.process.command_line) fact("Executable", r.process.executable);
    fact("Host", r.process.hostname);
    fact("Parent process", r.process.parent_pid ? std::to_string(r.process.parent_pid) : "");
    fact("Distributed", rank_text(r.distributed));
    fact("Started", r.process.start_unix_ns ? utc_time(r.process.start_unix_ns) : "");
    fact("Duration", format_duration_seconds(r.duration_s));
    fact("Events",
         fmt::format("{}, {}{}", plural(r.allocations, "allocation", "allocations"),
                     plural(r.frees, "free", "frees"),
                     r.unmatched_frees ? fmt::format(", {} of unknown addresses",
                                                     plural(r.unmatched_frees, "free", "frees"))
                                       : ""));
    fact("Peak live", format_bytes(r.peak_live_bytes));
    std::string origins;
    for (const analysis::OriginShare& share : r.device_memory_by_origin) {
      origins += fmt::format("{}{} {}{}", origins.empty() ? "" : "; ", share.origin,
                             format_bytes(share.bytes), share.tensors ? "" : " (not tensors)");
    }
    fact("Device memory by origin", origins);
    if (r.torch_tracking && r.torch_tracking->mode)
      fact("PyTorch tracking", *r.torch_tracking->mode);
    fact("Trace", r.trace_path);
    out_ << "</dl>\n";

    if (!r.trace_error.empty()) {
      out_ << "<p class=\"gl-warning\">The trace is incomplete: " << escape(r.trace_error)
           << " (at byte " << r.trace_error_offset
           << "). Everything before that point is reported.</p>\n";
    } else if (!r.exited) {
      out_ << "<p class=\"gl-warning\">The process did not exit normally (killed?): live "
              "memory is as of its last flush.</p>\n";
    }
    for (const std::string& damage : r.damage) {
      out_ << "<p class=\"gl-warning\">The trace is damaged: " << escape(damage)
           << ". Everything else read is reported.</p>\n";
    }
    if (r.lost_events) {
      out_ << "<p class=\"gl-warning\">"
           << escape(plural(r.lost_events, "event was", "events were"))
           << " lost by the collector (it never blocks the program), so allocations or frees may "
              "be missing and counts may be wrong.</p>\n";
    }
    if (r.compaction) {
      const auto& c = *r.compaction;
      out_ << "<p>The trace was compacted to stay under " << escape(format_bytes(c.bound_bytes))
           << " (" << escape(plural(c.compactions, "time", "times")) << "): the "
           << fmt::format("{:.1f}", c.summarized_until_s)
           << " s before the last compaction are a summary (what was live then, with its sites; "
           << escape(plural(c.steps.size(), "step mark", "step marks")) << " of "
           << c.summarized_steps << ", one kept every " << c.step_resolution
           << "); growth is judged on the raw events after it.</p>\n";
    }

    write_verdict(r);
    write_timeline(index, r);
    write_site_chart(index, r);
    write_flame_graph(index, r);
    write_growing_sites(r.growth);
    write_rising_sites(r.growth);
    write_out_of_memory(r);
    write_leaks(r.leaks, analysis::exit_memory_counts_as_leak(r));
    out_ << "</section>\n";
  }

  // The banner: the one verdict (analysis/processes/process_verdict.h), as the text
  // report and --fail-on-leak have it.
  void write_verdict(const ProcessReport& r) {
    const analysis::GrowthReport& g = r.growth;
    analysis::ProcessVerdict verdict = analysis::judge_process(r);
    out_ << "<div class=\"gl-verdict gl-verdict-" << verdict_class(verdict.kind) << "\">\n<p>";
    out_ << "<span class=\"gl-verdict-name\">" << analysis::process_verdict_name(verdict.kind)
         << "</span> ";
    switch (verdict.kind) {
      case analysis::ProcessVerdictKind::kLeak: {
        std::string text = format_rate(g.rate_bytes_per_step, "step");
        if (g.rate_bytes_per_second > 0)
          text += " (" + format_rate(g.rate_bytes_per_second, "s") + ")";
        text += ", growing " + growth_start_text(g.first_growing_step.value_or(0), g.warmup_steps);
        if (g.verdict_step) text += fmt::format(", found at step {}", *g.verdict_step);
        out_ << escape(text);
        break;
      }
      case analysis::ProcessVerdictKind::kLeaked:
        out_ << escape(fmt::format("{} in {} still allocated at exit", format_bytes(r.leaks.bytes),
                                   plural(r.leaks.allocations, "allocation", "allocations")));
        break;
      case analysis::ProcessVerdictKind::kNoLeak:
        out_ << (g.pool_judged ? "the pool's bytes in use do not keep growing"
                 : g.steps > 0 ? "no allocation site keeps growing"
                               : "everything allocated was freed before the process exited");
        break;
      case analysis::ProcessVerdictKind::kNotYet:
        out_ << (g.steps == 0 ? "no steps or time windows were recorded, so growth cannot be judged"
                              : "too few steps after warm-up to decide");
        break;
      case analysis::ProcessVerdictKind::kIncomplete:
        out_ << "no leak among the recorded events, but data is missing, so this is no clean bill";
        break;
    }
    out_ << "</p>\n";
    for (const std::string& reason : verdict.incomplete)
      out_ << "<p><span class=\"gl-label\">Data missing:</span> " << escape(reason) << "</p>\n";
    if (g.steps > 0) {
      out_ << "<p>"
           << escape(fmt::format(
                  "{} ({}), the first {} ignored as warm-up.", plural(g.steps, "step", "steps"),
                  g.step_source.empty() ? "unknown source" : g.step_source, g.warmup_steps))
           << "</p>\n";
    }
    if (std::string kept = kept_at_text(g.holder); !kept.empty())
      out_ << "<p><span class=\"gl-label\">Kept at:</span> <code>" << escape(kept)
           << "</code></p>\n";
    if (g.verdict == Verdict::kLeak && g.seconds_to_full) {
      out_ << "<p><span class=\"gl-label\">Time to full:</span> "
           << escape(fmt::format("the device is full in ~{} at this rate (of {})",
                                 format_duration_seconds(*g.seconds_to_full),
                                 format_bytes(g.device_total_bytes.value_or(0))))
           << "</p>\n";
    }
    // Before a verdict, a cause is what a rise would be if it goes on.
    const char* hedge = g.rising_sites.empty() ? "" : ", if it keeps rising";
    if (!g.cause.empty()) {
      out_ << "<p><span class=\"gl-label\">Cause" << hedge << ":</span> <code>" << escape(g.cause)
           << "</code>";
      if (!g.cause_text.empty()) out_ << ": " << escape(g.cause_text);
      out_ << "</p>\n";
    }
    std::string holder = holder_text(g.holder);
    if (!holder.empty())
      out_ << "<p><span class=\"gl-label\">Held by:</span> " << escape(holder) << "</p>\n";
    if (!g.fix.empty())
      out_ << "<p><span class=\"gl-label\">Fix" << hedge << ":</span> " << escape(g.fix)
           << "</p>\n";
    std::string where = fmt::format("{}; host memory {}", analysis::where_name(g.where),
                                    g.host_rss_bytes_per_step > 0
                                        ? "grows " + format_rate(g.host_rss_bytes_per_step, "step")
                                        : std::string("does not grow"));
    if (g.pool_reserved_bytes_per_step > 0)
      where += "; pool reserved grows " + format_rate(g.pool_reserved_bytes_per_step, "step");
    if (g.steps > 0)
      out_ << "<p><span class=\"gl-label\">Where:</span> " << escape(where) << "</p>\n";
    if (!g.note.empty())
      out_ << "<p><span class=\"gl-label\">Note:</span> " << escape(g.note) << "</p>\n";
    out_ << "</div>\n";
  }

  // The live bytes of the growing sites (or the largest, when none grows)
  // at each step: the sites the report names, one line each.
  void write_site_chart(std::size_t index, const ProcessReport& r) {
    if (!r.export_detail || r.timeline.site_live_bytes.size() < 2) return;
    out_ << "<h3>"
         << (r.growth.sites.empty() ? "Largest sites over time" : "Growing sites over time")
         << "</h3>\n";
    out_ << "<div class=\"gl-site-chart\" data-process=\"" << index
         << "\"><p class=\"gl-muted\">The plot is drawn by the page's script.</p></div>\n";
  }

  // Flame graphs of the sites: growth per step (the leak's), what was live
  // at exit and at the peak; the views with nothing to draw are left out.
  void write_flame_graph(std::size_t index, const ProcessReport& r) {
    if (r.growth.sites.empty() && r.leaks.groups.empty() && !r.export_detail) return;
    out_ << "<h3>Flame graph</h3>\n";
    out_ << "<div class=\"gl-flame\" data-process=\"" << index
         << "\"><p class=\"gl-muted\">The flame graph is drawn by the page's script.</p></div>\n";
    out_ << "<p class=\"gl-plot-note gl-muted\">Each stack ends at the line the report blames; "
            "width is bytes (per step for growth). Click a frame to zoom, type in the filter "
            "above to highlight.</p>\n";
  }

  void write_timeline(std::size_t index, const ProcessReport& r) {
    out_ << "<h3>Memory timeline</h3>\n";
    if (r.timeline.step.empty()) {
      if (!r.cuda_use.memory.empty()) {
        // A run without steps (a short CUDA program): the driver's memory as
        // it changed, which the trace holds whatever the run's length.
        out_ << "<div class=\"gl-driver-memory\" data-process=\"" << index
             << "\"><p class=\"gl-muted\">The plot is drawn by the page's script.</p></div>\n";
        out_ << "<p class=\"gl-plot-note gl-muted\">The run marks no steps: live tensors and "
                "device memory the driver handed out, over time.</p>\n";
      } else {
        out_ << "<p class=\"gl-muted\">No timeline: the trace holds no steps, time windows or "
                "allocations.</p>\n";
      }
      return;
    }
    out_ << "<div class=\"gl-timeline\" data-process=\"" << index
         << "\"><p class=\"gl-muted\">The plot of "
         << escape(plural(r.timeline.step.size(), "point", "points"))
         << " is drawn by the page's script.</p></div>\n";
    out_ << "<p class=\"gl-plot-note gl-muted\">Memory at the end of each "
         << (r.growth.step_source == "time-window" ? "time window (the program marks no steps)"
                                                   : "step")
         << ". Shaded: warm-up, ignored when judging growth."
         << (r.growth.verdict == Verdict::kLeak ? " Dashed line: the first growing step." : "")
         << " Click a legend entry to hide its series."
         << (r.timeline.boundaries > r.timeline.step.size()
                 ? fmt::format(
                       " {} of {} steps are drawn: every step of the first 512, the last 1,024 "
                       "and those before the growth was found; elsewhere each span's lowest and "
                       "highest.",
                       r.timeline.step.size(), r.timeline.boundaries)
                 : std::string())
         << "</p>\n";
  }

  void write_frame_item(const Frame& f) {
    std::string function = f.function;
    if (function.empty()) {
      function = f.language == Frame::Language::kNative ? fmt::format("0x{:x}", f.address) : "?";
    }
    std::string where;
    if (!f.file.empty()) {
      where = f.file + (f.line ? ":" + std::to_string(f.line) : "");
    } else if (!f.module.empty()) {
      where = base_name(f.module);
    }
    out_ << "<li class=\"" << (f.language == Frame::Language::kPython ? "gl-python" : "gl-native")
         << "\">";
    if (function.size() > kMaxFunctionChars) {
      out_ << "<span class=\"gl-function\" title=\"" << escape(function) << "\">"
           << escape(shortened(function, kMaxFunctionChars)) << "</span>";
    } else {
      out_ << "<span class=\"gl-function\">" << escape(function) << "</span>";
    }
    if (f.inlined) out_ << " <span class=\"gl-muted\">(inlined)</span>";
    if (!where.empty()) out_ << " <span class=\"gl-where\">" << escape(where) << "</span>";
    out_ << "</li>\n";
  }

  // The stack, innermost first. When some frames are the user's own, each run
  // of internal frames (CUDA, PyTorch, Python, gpuleak) folds into a <details>;
  // the leading frames of CUPTI and the driver always do.
  void write_frames(const std::vector<Frame>& frames) {
    if (frames.empty()) {
      out_ << "<p class=\"gl-muted\">No stack was recorded.</p>\n";
      return;
    }
    bool any_user = analysis::has_user_frame(frames);
    auto folded = [any_user](const Frame& f) { return analysis::folded_by_default(f, any_user); };
    out_ << "<ol class=\"gl-frames\">\n";
    std::size_t i = 0;
    while (i < frames.size()) {
      if (!folded(frames[i])) {
        write_frame_item(frames[i++]);
        continue;
      }
      std::size_t end = i;
      while (end < frames.size() && folded(frames[end])) ++end;
      out_ << "<li class=\"gl-internal-frames\"><details><summary>"
           << escape(plural(end - i, "internal frame", "internal frames"))
           << " (CUDA, PyTorch, Python or gpuleak)</summary>\n<ol class=\"gl-frames\">\n";
      for (; i < end; ++i) write_frame_item(frames[i]);
      out_ << "</ol></details></li>\n";
    }
    out_ << "</ol>\n";
  }

  void write_source_line(const analysis::Site& site) {
    if (site.source_line.empty()) return;
    out_ << "<pre class=\"gl-source\" title=\"" << escape(site.label()) << "\">"
         << escape(site.label()) << ": " << escape(site.source_line) << "</pre>\n";
  }

  void write_growing_sites(const analysis::GrowthReport& g) {
    if (g.sites.empty()) return;
    out_ << "<h3>Growing sites</h3>\n";
    for (const analysis::SiteGrowth& s : g.sites) {
      std::string facts =
          s.grew_until_step
              ? fmt::format("grew from step {} until step {}, flat for {} steps since, {} held",
                            s.first_growing_step, *s.grew_until_step, s.flat_steps,
                            format_bytes(s.live_bytes))
              : fmt::format(
                    "{} {}, {:.1f} allocations/step, {} live now ({}), growing since step {}",
                    s.bounded ? "bounded growth" : "grows",
                    format_rate(s.rate_bytes_per_step, "step"), s.allocations_per_step,
                    format_bytes(s.live_bytes),
                    plural(s.live_allocations, "allocation", "allocations"), s.first_growing_step);
      write_site_item(s, "gl-growing-site", std::move(facts));
    }
  }

  // One site of a growth list: its label, `facts` with the site's kind,
  // origin and whether it is a tensor, its frames and its source line.
  void write_site_item(const analysis::SiteGrowth& s, const char* css_class, std::string facts) {
    out_ << "<div class=\"gl-item " << css_class << "\">\n<p class=\"gl-item-head\">"
         << "<span class=\"gl-site\">" << escape(s.site.label()) << "</span> ";
    facts += fmt::format(" · {}", trace::memory_kind_name(s.kind));
    if (!s.origin.empty()) facts += " · " + s.origin;
    if (!s.tensor_level) facts += " · not a tensor";
    out_ << "<span class=\"gl-muted\">" << escape(facts) << "</span></p>\n";
    write_frames(s.frames);
    write_source_line(s.site);
    out_ << "</div>\n";
  }

  // NOT YET for too few steps: where memory rose, said as not a verdict
  // (text_report.cpp's "Rising so far").
  void write_rising_sites(const analysis::GrowthReport& g) {
    if (g.rising_sites.empty()) return;
    std::uint64_t judged = g.steps > g.warmup_steps ? g.steps - g.warmup_steps : 0;
    out_ << "<h3>Rising so far, not yet a verdict</h3>\n<p class=\"gl-muted\">"
         << escape(fmt::format(
                "{} steps after warm-up: memory that fills a cache for a while rises the same "
                "way, so a verdict waits for more",
                judged))
         << "</p>\n";
    for (const analysis::SiteGrowth& s : g.rising_sites) {
      write_site_item(s, "gl-rising-site",
                      fmt::format("rises {}, {:.1f} allocations/step, {} at the last step",
                                  format_rate(s.rate_bytes_per_step, "step"),
                                  s.allocations_per_step, format_bytes(s.live_bytes)));
    }
  }

  void write_out_of_memory(const ProcessReport& r) {
    if (r.out_of_memory.empty()) return;
    out_ << "<h3>Out of memory</h3>\n";
    for (const analysis::OutOfMemoryEvent& e : r.out_of_memory) {
      out_ << "<div class=\"gl-item gl-out-of-memory\">\n<p class=\"gl-item-head\">"
           << escape(fmt::format("At {:.2f} s: {} of {} failed{} (CUDA error {}) at ", e.time_s,
                                 e.api, format_bytes(e.requested_bytes),
                                 e.device >= 0 ? fmt::format(" on GPU {}", e.device) : "",
                                 e.result))
           << "<span class=\"gl-site\">" << escape(e.site.label()) << "</span></p>\n";
      write_frames(e.frames);
      write_source_line(e.site);
      out_ << "<p>"
           << escape(fmt::format("Live at that moment: {} in {}.", format_bytes(e.live_bytes),
                                 plural(e.live_allocations, "allocation", "allocations")))
           << "</p>\n";
      if (!e.largest_live.empty()) {
        out_ << "<ul>\n";
        for (const LeakGroup& g : e.largest_live) {
          out_ << "<li>"
               << escape(fmt::format("{} in {} at ", format_bytes(g.bytes),
                                     plural(g.allocations, "allocation", "allocations")))
               << "<code>" << escape(g.site.label()) << "</code></li>\n";
        }
        out_ << "</ul>\n";
      }
      out_ << "</div>\n";
    }
  }

  void write_group(const LeakGroup& g) {
    out_ << "<div class=\"gl-item gl-leak-group\">\n<p class=\"gl-item-head\">"
         << "<span class=\"gl-site\">" << escape(g.site.label()) << "</span> <span>"
         << escape(fmt::format("{} in {}", format_bytes(g.bytes),
                               plural(g.allocations, "allocation", "allocations")))
         << "</span> <span class=\"gl-muted\">"
         << escape(fmt::format("{} · {}{}", trace::memory_kind_name(g.kind), g.api,
                               g.device >= 0 ? fmt::format(" · GPU {}", g.device) : ""))
         << "</span></p>\n";
    write_frames(g.frames);
    write_source_line(g.site);
    out_ << "</div>\n";
  }

  void write_leaks(const analysis::LeakSummary& leaks, bool counts_as_leak) {
    out_ << "<h3>Still allocated at exit</h3>\n";
    if (!counts_as_leak && leaks.allocations > 0) {
      out_ << "<p class=\"gl-muted\">PyTorch keeps its cache, cuBLAS workspaces and the tensors "
              "still referenced until the process ends: this is not a leak by itself; the verdict "
              "above says whether memory leaks.</p>\n";
    }
    if (leaks.allocations == 0) {
      out_ << "<p>Nothing: every allocation was freed before the process ended";
      if (leaks.suppressed_allocations) {
        out_ << escape(
            fmt::format(" (apart from {} in {}, suppressed)", format_bytes(leaks.suppressed_bytes),
                        plural(leaks.suppressed_allocations, "allocation", "allocations")));
      }
      out_ << ".</p>\n";
    } else {
      out_ << "<p>"
           << escape(fmt::format("{} in {}, from {}, largest first:", format_bytes(leaks.bytes),
                                 plural(leaks.allocations, "allocation", "allocations"),
                                 plural(leaks.groups.size(), "place", "places")))
           << "</p>\n";
      for (std::size_t i = 0; i < leaks.groups.size() && i < kMaxGroupsShown; ++i)
        write_group(leaks.groups[i]);
      if (leaks.groups.size() > kMaxGroupsShown) {
        out_ << "<p class=\"gl-muted\">"
             << escape(
                    fmt::format("... and {} more; the embedded JSON report lists them all.",
                                plural(leaks.groups.size() - kMaxGroupsShown, "place", "places")))
             << "</p>\n";
      }
    }
    if (!leaks.suppressed_groups.empty()) {
      out_ << "<details><summary>"
           << escape(fmt::format("Suppressed: {} in {}", format_bytes(leaks.suppressed_bytes),
                                 plural(leaks.suppressed_allocations, "allocation", "allocations")))
           << "</summary>\n<ul>\n";
      for (const LeakGroup& g : leaks.suppressed_groups) {
        out_ << "<li>"
             << escape(fmt::format("{} in {} at ", format_bytes(g.bytes),
                                   plural(g.allocations, "allocation", "allocations")))
             << "<code>" << escape(g.site.label()) << "</code>";
        if (!g.suppressed_by.empty()) out_ << " (rule " << escape(g.suppressed_by) << ")";
        out_ << "</li>\n";
      }
      out_ << "</ul>\n</details>\n";
    }
  }

  std::ostream& out_;
  const std::vector<analysis::UnusableTrace>& unusable_;
  std::optional<std::string> ranks_;  // the job's ranks in words (analysis/processes/job_ranks.h)
};

}  // namespace

void write_html_report(std::ostream& out, const std::vector<analysis::ProcessReport>& reports,
                       const std::vector<analysis::UnusableTrace>& unusable) {
  PageWriter(out, unusable).write(reports);
}

void write_html_report(std::ostream& out, const std::vector<analysis::ProcessReport>& reports,
                       const analysis::JobReport& job,
                       const std::vector<analysis::UnusableTrace>& unusable) {
  PageWriter(out, unusable).write(reports, &job);
}

}  // namespace gpuleak::report
