// libFuzzer target: any bytes, as a whole trace file, through what `gpuleak
// report` does with it: analyze_trace_file (reader, damage detector,
// sequencer, analysis), the one verdict, and the text, JSON and HTML
// reports. It must give reports or a TraceError naming the file; never a
// crash, a hang, another exception or a sanitizer report. And what it
// writes must hold together:
//   * the JSON and HTML are valid UTF-8 whatever bytes the trace holds;
//   * the text report names the same verdict as the JSON;
//   * a trace with damage, lost events or an early end is never NO LEAK.
//
// Source paths are left as the input names them: reports must never open
// them (analysis/model/source_lines.h). Module paths are moved under a folder that
// does not exist (the symbolizer may read ELF files a trace names; a random
// input naming a large real library would only be slow), and event times
// folded near the process start, as in trace_reader_fuzz.cpp (the time
// window bound belongs to the growth tracker's work).
#include <cstdint>
#include <sstream>
#include <string>

#include "analysis/processes/process_verdict.h"
#include "analysis/trace_loader.h"
#include "fuzz_input.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/json_text.h"
#include "report/text_report.h"
#include "trace/trace_reader.h"

namespace {

using namespace gpuleak;
using fuzz::fail;

void edit(trace::Record& record) {
  if (auto* m = std::get_if<trace::ModuleRecord>(&record))
    m->path = "/nonexistent-gpuleak-fuzz" + m->path;
  static std::uint64_t start_ns = 0;
  if (auto* p = std::get_if<trace::ProcessRecord>(&record)) {
    p->start_monotonic_ns %= 1ull << 62;
    start_ns = p->start_monotonic_ns;
    return;
  }
  std::visit(
      [](auto& r) {
        if constexpr (requires { r.time_ns; }) {
          if (r.time_ns > start_ns) r.time_ns = start_ns + (r.time_ns - start_ns) % (1ull << 34);
        }
      },
      record);
}

void check_utf8(const std::string& text, const char* what) {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = report::utf8_sequence_bytes(text, i);
    if (n == 0) fail(std::string(what) + " is not valid UTF-8 at byte " + std::to_string(i));
    i += n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = fuzz::memory_file_with(fuzz::trace_file_from(data, size, edit));
  analysis::AnalysisOptions options;
  options.growth.warmup_steps = 2;
  options.growth.min_steps = 8;
  options.growth.window_steps = 24;
  options.growth.min_increases = 4;
  std::vector<analysis::ProcessReport> reports;
  std::vector<analysis::UnusableTrace> unusable;
  try {
    reports.push_back(analysis::analyze_trace_file(path, options));
  } catch (const trace::TraceError& e) {
    if (std::string(e.what()).rfind(path + ": ", 0) != 0) fail("TraceError does not name the file");
    unusable.push_back({path, e.what()});
  }

  std::ostringstream text;
  report::write_text_report(text, reports, {});
  std::string json = report::json_text(report::to_json(reports, unusable), 2);
  check_utf8(json, "the JSON report");
  std::ostringstream html;
  report::write_html_report(html, reports, unusable);
  check_utf8(html.str(), "the HTML report");

  for (const analysis::ProcessReport& r : reports) {
    analysis::ProcessVerdict verdict = analysis::judge_process(r);
    std::string name = analysis::process_verdict_name(verdict.kind);
    if (text.str().find("Verdict: " + name) == std::string::npos)
      fail("the text report does not name the verdict " + name);
    if (json.find("\"name\": \"" + name + "\"") == std::string::npos)
      fail("the JSON report does not name the verdict " + name);
    bool missing = r.lost_events > 0 || !r.damage.empty() || !r.trace_error.empty();
    if (missing && verdict.kind == analysis::ProcessVerdictKind::kNoLeak)
      fail("NO LEAK for a trace with missing data");
    if (r.leaks.allocations > r.allocations) fail("more leaked than allocated");
  }
  return 0;
}
