// The HTML report as text: escaping of everything that comes from a trace,
// the embedded JSON data block, and the page's structure. The page in a real
// browser is checked by html_browser_test.mjs.
#include "report/html_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/processes/process_verdict.h"
#include "report/html_page_data.h"
#include "report/json_report.h"
#include "report/text_report.h"

namespace gpuleak::report {
namespace {

using analysis::Frame;
using analysis::ProcessReport;

constexpr const char* kScriptBreakout = "</script><script>alert(1)</script>";
constexpr const char* kBold = "<b>bold</b>";

std::string page_of(const std::vector<ProcessReport>& reports) {
  std::ostringstream out;
  write_html_report(out, reports);
  return out.str();
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The text between <script type="application/json" id="gpuleak-data"> and
// the first "</script>" after it.
std::string data_block(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"gpuleak-data\">";
  auto start = page.find(open);
  if (start == std::string::npos) return {};
  start += open.size();
  auto end = page.find("</script>", start);
  return end == std::string::npos ? std::string() : page.substr(start, end - start);
}

Frame frame(std::string function, std::string file, std::uint32_t line, bool internal) {
  Frame f;
  f.language = internal ? Frame::Language::kNative : Frame::Language::kPython;
  f.function = std::move(function);
  f.file = std::move(file);
  f.line = line;
  f.internal = internal;
  if (internal) f.module = "/usr/lib/libtorch_cuda.so";
  return f;
}

// A leaking process whose every trace-provided text carries markup.
ProcessReport hostile_report() {
  std::string markup = std::string(kScriptBreakout) + kBold;
  ProcessReport r;
  r.trace_path = "/tmp/<b>traces</b>/gpuleak-7.trace";
  r.process.pid = 7;
  r.process.parent_pid = 1;
  r.process.command_line = "python3 train.py --name " + markup;
  r.process.executable = "/usr/bin/python3";
  r.process.hostname = "host" + markup;
  r.exited = true;
  r.allocations = 100;
  r.frees = 20;
  r.torch_tracking = analysis::TorchTracking{};
  r.torch_tracking->mode = "allocator-hook</script><b>x</b>";

  std::vector<Frame> frames = {frame("c10::alloc" + markup, "", 0, true),
                               frame("keep" + markup, "/src/<b>dir</b>/train.py", 42, false),
                               frame("<module>", "/src/<b>dir</b>/train.py", 90, false)};
  analysis::Site site;
  site.function = "keep" + markup;
  site.file = "/src/<b>dir</b>/train" + markup + ".py";
  site.line = 42;
  site.source_line = "losses.append(loss)  # " + markup;

  analysis::GrowthReport& g = r.growth;
  g.verdict = analysis::Verdict::kLeak;
  g.steps = 80;
  g.step_source = "explicit";
  g.warmup_steps = 5;
  g.rate_bytes_per_step = 65536;
  g.rate_bytes_per_second = 1 << 20;
  g.first_growing_step = 6;
  g.verdict_step = 44;
  g.seconds_to_full = 3600;
  g.device_total_bytes = 80ULL << 30;
  g.cause = "tensors-kept-alive";
  g.cause_text = "kept by " + markup;
  g.fix = "store loss.item() " + markup;
  g.note = "note " + markup;
  g.holder = analysis::HolderAnswer{};
  g.holder->kind = "tensor";
  g.holder->graph_tensors_per_element = 3;
  g.holder->holder = analysis::Holder{};
  g.holder->holder->type = "list";
  g.holder->holder->name = "losses</script><b>x</b>";
  g.holder->holder->owner = "module __main__";
  analysis::SiteGrowth s;
  s.rate_bytes_per_step = 65536;
  s.allocations_per_step = 1;
  s.live_bytes = 80 * 65536;
  s.live_allocations = 80;
  s.first_growing_step = 6;
  s.origin = "origin" + markup;
  s.frames = frames;
  s.site = site;
  g.sites.push_back(s);

  analysis::LeakGroup group;
  group.bytes = 80 * 65536;
  group.allocations = 80;
  group.kind = trace::MemoryKind::kTorchBlock;
  group.api = "api" + markup;
  group.device = 0;
  group.frames = frames;
  group.site = site;
  r.leaks.bytes = group.bytes;
  r.leaks.allocations = group.allocations;
  r.leaks.groups.push_back(group);
  group.suppressed = true;
  group.suppressed_by = "rule" + markup;
  r.leaks.suppressed_bytes = group.bytes;
  r.leaks.suppressed_allocations = group.allocations;
  r.leaks.suppressed_groups.push_back(group);

  analysis::OutOfMemoryEvent oom;
  oom.time_s = 1.5;
  oom.requested_bytes = 1ULL << 30;
  oom.api = "cuMemAlloc" + markup;
  oom.device = 0;
  oom.result = 2;
  oom.frames = frames;
  oom.site = site;
  oom.largest_live.push_back(r.leaks.groups.front());
  r.out_of_memory.push_back(oom);

  for (std::uint64_t step = 0; step < 10; ++step) {
    r.timeline.step.push_back(step);
    r.timeline.time_s.push_back(0.1 * static_cast<double>(step));
    r.timeline.live_tensor_bytes.push_back(step * 65536);
    r.timeline.live_device_bytes.push_back(0);
    r.timeline.pool_reserved_bytes.push_back(std::nullopt);
    r.timeline.device_used_bytes.push_back(1ULL << 30);
    r.timeline.host_rss_bytes.push_back(1ULL << 28);
  }
  return r;
}

ProcessReport clean_report(std::uint32_t pid) {
  ProcessReport r;
  r.process.pid = pid;
  r.process.command_line = "python3 worker.py";
  r.exited = true;
  r.growth.verdict = analysis::Verdict::kNoLeak;
  r.growth.steps = 60;
  r.growth.step_source = "optimizer-hook";
  r.timeline.step = {0, 1};
  r.timeline.time_s = {0, 1};
  r.timeline.live_tensor_bytes = {10, 10};
  r.timeline.live_device_bytes = {0, 0};
  r.timeline.pool_reserved_bytes = {std::nullopt, std::nullopt};
  r.timeline.device_used_bytes = {std::nullopt, std::nullopt};
  r.timeline.host_rss_bytes = {std::nullopt, std::nullopt};
  return r;
}

TEST(HtmlReport, markup_in_trace_texts_cannot_close_a_script_or_add_elements) {
  std::string page = page_of({hostile_report()});
  // Only the page's own five scripts open and close (the data block, uPlot,
  // d3, d3-flame-graph and the page's script).
  EXPECT_EQ(count(page, "<script"), 5u);
  EXPECT_EQ(count(page, "</script>"), 5u);
  EXPECT_EQ(count(page, "<b>"), 0u);
  // ...and the markup is shown as text.
  EXPECT_NE(page.find("keep&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold"
                      "&lt;/b&gt;"),
            std::string::npos);
  EXPECT_NE(page.find("losses.append(loss)  # &lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("/src/&lt;b&gt;dir&lt;/b&gt;/train.py:42"), std::string::npos);
  EXPECT_NE(page.find("list `losses&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;` (module __main__)"),
            std::string::npos);
}

TEST(HtmlReport, markup_in_attribute_values_cannot_end_the_attribute) {
  ProcessReport r = hostile_report();
  // Long names are shortened in the text and kept whole in a title="...".
  r.growth.sites[0].frames[1].function = std::string(300, 'f') + "\" onmouseover=\"alert(1)";
  std::string page = page_of({r});
  EXPECT_EQ(page.find("\" onmouseover=\""), std::string::npos);
  EXPECT_NE(page.find("&quot; onmouseover=&quot;alert(1)"), std::string::npos);
}

TEST(HtmlReport, embedded_data_is_the_json_report_and_escapes_angle_brackets) {
  std::vector<ProcessReport> reports = {hostile_report()};
  std::string block = data_block(page_of(reports));
  ASSERT_FALSE(block.empty());
  EXPECT_EQ(block.find('<'), std::string::npos);
  EXPECT_EQ(block.find('>'), std::string::npos);
  EXPECT_EQ(block.find('&'), std::string::npos);
  EXPECT_NE(block.find("\\u003c/script\\u003e"), std::string::npos);
  // The JSON report, each process with what the page draws beyond it
  // (html_page_data.h) under "page".
  nlohmann::json parsed = nlohmann::json::parse(block);
  ASSERT_EQ(parsed["processes"].size(), 1u);
  EXPECT_EQ(parsed["processes"][0]["page"], html_page_data(reports[0]));
  parsed["processes"][0].erase("page");
  EXPECT_EQ(parsed, to_json(reports));
}

TEST(HtmlReport, name_that_is_not_utf8_does_not_fail_the_page) {
  ProcessReport r = hostile_report();
  r.growth.sites[0].frames[1].function = "bad\xff\xfename";
  std::string page;
  EXPECT_NO_THROW(page = page_of({r}));
  // The data keeps the exact bytes (PEP 383 escapes, which JavaScript's
  // JSON.parse reads as lone surrogates); the visible text shows U+FFFD.
  EXPECT_NE(data_block(page).find("\"function\":\"bad\\udcff\\udcfename\""), std::string::npos);
  EXPECT_NE(page.find("bad\xEF\xBF\xBD\xEF\xBF\xBDname"), std::string::npos);
  EXPECT_EQ(page.find("bad\xff"), std::string::npos);
}

TEST(HtmlReport, page_names_no_outside_resource_and_forbids_fetching_any) {
  std::string page = page_of({hostile_report(), clean_report(8)});
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("<link rel=\"stylesheet\""), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  // The only links: the favicon as data, and the summary's in-page anchors.
  EXPECT_EQ(count(page, "href="), count(page, "href=\"#process-") + 1);
  EXPECT_NE(page.find("<link rel=\"icon\" href=\"data:,\">"), std::string::npos);
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'; "
                      "script-src 'sha256-"),
            std::string::npos);
}

TEST(HtmlReport, leak_banner_gives_rate_time_to_full_cause_holder_and_fix) {
  std::string page = page_of({hostile_report()});
  EXPECT_NE(page.find("<div class=\"gl-verdict gl-verdict-leak\">"), std::string::npos);
  EXPECT_NE(page.find("<span class=\"gl-verdict-name\">LEAK</span> +64.0 KiB/step (+1.00 MiB/s), "
                      "growing since step 6, found at step 44"),
            std::string::npos);
  EXPECT_NE(page.find("the device is full in ~1 h 0 min at this rate (of 80.0 GiB)"),
            std::string::npos);
  EXPECT_NE(page.find("<code>tensors-kept-alive</code>"), std::string::npos);
  EXPECT_NE(page.find("one autograd graph of 3 tensors per element"), std::string::npos);
  EXPECT_NE(page.find("Fix:</span> store loss.item()"), std::string::npos);
}

TEST(HtmlReport, internal_frames_fold_behind_details_when_user_frames_exist) {
  ProcessReport r = clean_report(9);
  analysis::LeakGroup group;
  group.bytes = 4096;
  group.allocations = 1;
  group.frames = {frame("cudaMalloc", "", 0, true), frame("alloc", "", 0, true),
                  frame("train", "/src/train.py", 3, false), frame("run", "", 0, true)};
  r.leaks.bytes = 4096;
  r.leaks.allocations = 1;
  r.leaks.groups.push_back(group);
  std::string page = page_of({r});
  EXPECT_EQ(count(page, "<li class=\"gl-internal-frames\"><details>"), 2u);
  EXPECT_NE(page.find("<summary>2 internal frames"), std::string::npos);
  EXPECT_NE(page.find("<summary>1 internal frame "), std::string::npos);

  // Only internal frames: nothing to fold them away from, so all are shown.
  r.leaks.groups[0].frames = {frame("cudaMalloc", "", 0, true), frame("alloc", "", 0, true)};
  page = page_of({r});
  EXPECT_EQ(page.find("<details>"), std::string::npos);
  EXPECT_NE(page.find("<span class=\"gl-function\">cudaMalloc</span>"), std::string::npos);
}

TEST(HtmlReport, several_processes_get_a_summary_row_and_a_section_each) {
  std::string page = page_of({hostile_report(), clean_report(8), clean_report(9)});
  EXPECT_EQ(count(page, "<table class=\"gl-summary\">"), 1u);
  EXPECT_EQ(count(page, "<tr><td><a href=\"#process-"), 3u);
  EXPECT_EQ(count(page, "<section class=\"gl-process\""), 3u);
  EXPECT_EQ(count(page, "<div class=\"gl-timeline\" data-process="), 3u);
  EXPECT_NE(page.find("<title>gpuleak report: 3 processes (pids 7, 8, 9)</title>"),
            std::string::npos);

  std::string single = page_of({clean_report(8)});
  EXPECT_EQ(single.find("<table class=\"gl-summary\">"), std::string::npos);
  EXPECT_NE(single.find("<title>gpuleak report: python3 worker.py (pid 8)</title>"),
            std::string::npos);
  EXPECT_NE(single.find("<span class=\"gl-verdict-name\">NO LEAK</span>"), std::string::npos);
}

TEST(HtmlReport, ranks_of_a_distributed_job_show_in_the_summary_and_the_section) {
  ProcessReport rank0 = clean_report(10), rank1 = clean_report(11);
  rank0.distributed = analysis::DistributedRank{0, 0, 2, std::nullopt};
  rank1.distributed = analysis::DistributedRank{1, 1, 2, std::nullopt};
  std::string page = page_of({rank0, rank1});
  EXPECT_NE(page.find("<th>Rank</th>"), std::string::npos);
  EXPECT_NE(page.find("<td>rank 1 of 2 (local rank 1)</td>"), std::string::npos);
  EXPECT_NE(page.find("<dt>Distributed</dt><dd>rank 0 of 2 (local rank 0)</dd>"),
            std::string::npos);
  EXPECT_EQ(page_of({clean_report(8), clean_report(9)}).find("<th>Rank</th>"), std::string::npos);
}

TEST(HtmlReport, process_without_steps_says_so_instead_of_an_empty_plot) {
  ProcessReport r = clean_report(5);
  r.growth = {};
  r.timeline = {};
  r.exited = false;  // killed: nothing left live at its last flush proves nothing
  std::string page = page_of({r});
  EXPECT_EQ(page.find("class=\"gl-timeline\""), std::string::npos);
  EXPECT_NE(page.find("No timeline"), std::string::npos);
  EXPECT_NE(page.find("NOT YET</span> no steps or time windows were recorded"), std::string::npos);
  r.exited = true;  // exited with everything freed: that is a verdict
  EXPECT_NE(page_of({r}).find("NO LEAK</span> everything allocated was freed before the process "
                              "exited"),
            std::string::npos);
}

// A CUDA program without steps that left memory allocated: the text report
// and --fail-on-leak say LEAKED; the banner said NOT YET. It must say what
// they say (analysis/processes/process_verdict.h).
TEST(HtmlReport, banner_shows_the_same_verdict_as_the_text_report_and_the_gate) {
  ProcessReport r = clean_report(6);
  r.growth = {};  // no steps: the growth verdict is NOT YET
  r.leaks.allocations = 4;
  r.leaks.bytes = 4 << 20;
  analysis::LeakGroup g;
  g.allocations = 4;
  g.bytes = 4 << 20;
  r.leaks.groups.push_back(g);
  std::string page = page_of({r});
  EXPECT_NE(page.find("<div class=\"gl-verdict gl-verdict-leak\">"), std::string::npos);
  EXPECT_NE(page.find("<span class=\"gl-verdict-name\">LEAKED</span> 4.00 MiB in 4 allocations "
                      "still allocated at exit"),
            std::string::npos);
  std::ostringstream text;
  report::write_text_report(text, {r}, {});
  EXPECT_NE(text.str().find("Verdict: LEAKED: 4.00 MiB in 4 allocations still allocated at exit"),
            std::string::npos)
      << text.str();
  EXPECT_TRUE(analysis::judge_process(r).leak);
}

TEST(HtmlReport, lost_events_are_never_a_clean_bill) {
  ProcessReport r = clean_report(7);
  r.lost_events = 1000;
  std::string page = page_of({r});
  EXPECT_NE(page.find("<span class=\"gl-verdict-name\">INCOMPLETE</span>"), std::string::npos);
  EXPECT_NE(page.find("1000 events were lost by the collector"), std::string::npos);
  EXPECT_EQ(page.find(">NO LEAK<"), std::string::npos);
  r.damage = {"20 events are missing"};
  page = page_of({r});
  EXPECT_NE(page.find("The trace is damaged: 20 events are missing"), std::string::npos);
}

TEST(HtmlReport, bytes_that_are_not_utf8_become_a_replacement_character_in_text) {
  ProcessReport r = clean_report(8);
  r.process.command_line = "python3 train.py --name=J\xf6rg";
  std::string page = page_of({r});
  EXPECT_EQ(page.find("J\xf6rg"), std::string::npos);
  EXPECT_NE(page.find("J\xef\xbf\xbdrg"), std::string::npos);  // U+FFFD in the text
  EXPECT_NE(page.find("J\\udcf6rg"), std::string::npos);       // the exact byte in the data
}

TEST(HtmlReport, unusable_traces_are_named_on_the_page_and_in_its_data) {
  std::ostringstream out;
  report::write_html_report(out, {clean_report(9)},
                            {{"/t/empty.trace", "/t/empty.trace: file is 0 bytes"}});
  EXPECT_NE(out.str().find("No report for a trace: /t/empty.trace: file is 0 bytes."),
            std::string::npos);
  EXPECT_NE(out.str().find("\"unusable_traces\":[{\"error\":\"/t/empty.trace: file is 0 bytes\""),
            std::string::npos);
}

TEST(HtmlReport, long_command_is_shortened_without_splitting_a_character) {
  ProcessReport r = clean_report(8);
  // 76 ASCII bytes, then two-byte characters: a cut at byte 77 would split one.
  std::string ascii = "python3 " + std::string(68, 'x');
  r.process.command_line = ascii + "\xC3\xA9\xC3\xA9\xC3\xA9 tail";
  std::string page = page_of({r});
  EXPECT_NE(page.find("<title>gpuleak report: " + ascii + "... (pid 8)</title>"),
            std::string::npos);
}

TEST(HtmlReport, empty_report_is_still_a_complete_page) {
  std::string page = page_of({});
  EXPECT_EQ(page.rfind("</html>\n"), page.size() - 8);
  EXPECT_NE(page.find("nothing to report"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(data_block(page)), to_json(std::vector<ProcessReport>{}));
}

// JAX preallocating, judged by its pool's bytes in use at each time round the
// main script's loop: the text names the loop the pool grew in (the arrays
// have no stacks) and a clean run says what was judged.
TEST(PoolJudgedReport, text_json_and_page_say_the_verdict_is_the_pools) {
  ProcessReport r = clean_report(8);
  r.growth.step_source = "python-loop";
  r.growth.pool_judged = true;
  std::ostringstream clean;
  report::write_text_report(clean, {r}, {});
  EXPECT_NE(clean.str().find("Verdict: NO LEAK (the pool's bytes in use do not keep growing)"),
            std::string::npos)
      << clean.str();
  EXPECT_NE(page_of({r}).find("bytes in use do not keep growing"), std::string::npos);

  r.growth.verdict = analysis::Verdict::kLeak;
  r.growth.rate_bytes_per_step = 1 << 20;
  analysis::SiteGrowth pool;
  pool.site_id = analysis::kPoolSiteId;
  pool.rate_bytes_per_step = 1 << 20;
  pool.live_bytes = 200 << 20;
  pool.origin = "arrays inside the framework's pool (its bytes in use)";
  pool.site.file = "/job/leak_param_history.py";
  pool.site.line = 49;
  pool.site.function = "main";
  r.growth.sites.push_back(pool);
  std::ostringstream leak;
  report::write_text_report(leak, {r}, {});
  EXPECT_NE(leak.str().find("Growing +1.00 MiB/iteration"), std::string::npos) << leak.str();
  EXPECT_NE(leak.str().find("in the loop at leak_param_history.py:49 in main; the arrays inside "
                            "the pool are not seen one by one"),
            std::string::npos)
      << leak.str();
  EXPECT_EQ(leak.str().find("no stack recorded"), std::string::npos);
  nlohmann::json json = report::to_json(r);
  EXPECT_EQ(json["growth"]["pool_judged"], true);
  EXPECT_EQ(json["growth"]["sites"][0]["site_id"], 4294967295u);
  EXPECT_EQ(json["growth"]["sites"][0]["site"]["function"], "main");
}

}  // namespace
}  // namespace gpuleak::report
