#include "report/json_report.h"

#include "analysis/process_verdict.h"

namespace gpuleak::report {

using nlohmann::json;

namespace {

json frame_json(const analysis::Frame& f) {
  json j = {{"language", f.language == analysis::Frame::Language::kNative ? "native" : "python"},
            {"function", f.function},
            {"file", f.file},
            {"line", f.line},
            {"internal", f.internal},
            {"plumbing", f.plumbing}};
  if (f.language == analysis::Frame::Language::kNative) {
    j["module"] = f.module;
    j["address"] = f.address;
    j["inlined"] = f.inlined;
  }
  return j;
}

json frames_json(const std::vector<analysis::Frame>& frames) {
  json out = json::array();
  for (const auto& f : frames) out.push_back(frame_json(f));
  return out;
}

json site_json(const analysis::Site& s) {
  return {{"function", s.function},
          {"file", s.file},
          {"line", s.line},
          {"source_line", s.source_line},
          {"backward_node", s.backward_node},
          {"label", s.label()}};
}

json group_json(const analysis::LeakGroup& g) {
  json j = {{"bytes", g.bytes},
            {"allocations", g.allocations},
            {"kind", trace::memory_kind_name(g.kind)},
            {"api", g.api},
            {"device", g.device},
            {"stack_ids", g.stack_ids},
            {"site", site_json(g.site)},
            {"frames", frames_json(g.frames)}};
  if (g.suppressed) j["suppressed_by"] = g.suppressed_by;
  return j;
}

template <class T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json optional_series(const std::vector<std::optional<std::uint64_t>>& values) {
  json out = json::array();
  for (const auto& v : values) out.push_back(optional_json(v));
  return out;
}

json parsed_or_null(const std::string& text) {
  if (text.empty()) return nullptr;
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json(text) : j;
}

}  // namespace

json to_json(const analysis::ProcessReport& r) {
  json leaks = {{"counts_as_leak", analysis::exit_memory_counts_as_leak(r)},
                {"bytes", r.leaks.bytes},
                {"allocations", r.leaks.allocations},
                {"groups", json::array()},
                {"suppressed_bytes", r.leaks.suppressed_bytes},
                {"suppressed_allocations", r.leaks.suppressed_allocations},
                {"suppressed_groups", json::array()}};
  for (const auto& g : r.leaks.groups) leaks["groups"].push_back(group_json(g));
  for (const auto& g : r.leaks.suppressed_groups)
    leaks["suppressed_groups"].push_back(group_json(g));

  json oom = json::array();
  for (const auto& e : r.out_of_memory) {
    json largest = json::array();
    for (const auto& g : e.largest_live) largest.push_back(group_json(g));
    oom.push_back({{"time_s", e.time_s},
                   {"requested_bytes", e.requested_bytes},
                   {"api", e.api},
                   {"device", e.device},
                   {"cuda_error", e.result},
                   {"live_bytes", e.live_bytes},
                   {"live_allocations", e.live_allocations},
                   {"site", site_json(e.site)},
                   {"frames", frames_json(e.frames)},
                   {"largest_live", largest}});
  }

  const analysis::GrowthReport& g = r.growth;
  json sites = json::array();
  for (const auto& s : g.sites) {
    sites.push_back({{"site_id", s.site_id},
                     {"rate_bytes_per_step", s.rate_bytes_per_step},
                     {"allocations_per_step", s.allocations_per_step},
                     {"live_bytes", s.live_bytes},
                     {"live_allocations", s.live_allocations},
                     {"first_growing_step", s.first_growing_step},
                     {"kind", trace::memory_kind_name(s.kind)},
                     {"tensor_level", s.tensor_level},
                     {"origin", s.origin},
                     {"bounded", s.bounded},
                     {"grew_until_step", optional_json(s.grew_until_step)},
                     {"flat_steps", s.flat_steps},
                     {"site", site_json(s.site)},
                     {"frames", frames_json(s.frames)}});
  }
  json phases = json::array();
  for (const auto& p : g.phases) {
    phases.push_back({{"name", p.name},
                      {"label", p.label.empty() ? json(nullptr) : json(p.label)},
                      {"step_source", p.step_source},
                      {"steps", p.steps},
                      {"verdict", analysis::verdict_name(p.verdict)},
                      {"rate_bytes_per_step", p.rate_bytes_per_step},
                      {"verdict_step", optional_json(p.verdict_step)},
                      {"primary", p.primary}});
  }
  json growth = {{"verdict", analysis::verdict_name(g.verdict)},
                 {"steps", g.steps},
                 {"step_source", g.step_source},
                 {"phase", g.phase},
                 {"step_source_reason", g.step_source_reason},
                 {"undecided_reason", g.undecided_reason},
                 {"phases", phases},
                 {"warmup_steps", g.warmup_steps},
                 {"rate_bytes_per_step", g.rate_bytes_per_step},
                 {"rate_bytes_per_second", g.rate_bytes_per_second},
                 {"first_growing_step", optional_json(g.first_growing_step)},
                 {"verdict_step", optional_json(g.verdict_step)},
                 {"seconds_to_full", optional_json(g.seconds_to_full)},
                 {"device_total_bytes", optional_json(g.device_total_bytes)},
                 {"cause", g.cause.empty() ? json(nullptr) : json(g.cause)},
                 {"cause_text", g.cause_text},
                 {"where", analysis::where_name(g.where)},
                 {"host_rss_bytes_per_step", g.host_rss_bytes_per_step},
                 {"pool_reserved_bytes_per_step", g.pool_reserved_bytes_per_step},
                 {"holder", parsed_or_null(g.holder_json)},
                 {"fix", g.fix},
                 {"note", g.note},
                 {"lossy_steps", g.lossy_steps},
                 {"window_steps", g.window_steps},
                 {"sites", sites}};

  json origins = json::array();
  for (const auto& share : r.device_memory_by_origin) {
    origins.push_back(
        {{"origin", share.origin}, {"bytes", share.bytes}, {"tensors", share.tensors}});
  }

  const analysis::Timeline& t = r.timeline;
  json timeline = {{"boundaries", t.boundaries},
                   {"step", t.step},
                   {"time_s", t.time_s},
                   {"live_tensor_bytes", t.live_tensor_bytes},
                   {"live_device_bytes", t.live_device_bytes},
                   {"pool_reserved_bytes", optional_series(t.pool_reserved_bytes)},
                   {"device_used_bytes", optional_series(t.device_used_bytes)},
                   {"host_rss_bytes", optional_series(t.host_rss_bytes)}};

  analysis::ProcessVerdict verdict = analysis::judge_process(r);
  json verdict_json = {{"name", analysis::process_verdict_name(verdict.kind)},
                       {"leak", verdict.leak},
                       {"complete", verdict.complete()},
                       {"incomplete", verdict.incomplete}};

  return {{"trace", r.trace_path},
          {"pid", r.process.pid},
          {"parent_pid", r.process.parent_pid},
          {"command_line", r.process.command_line},
          {"executable", r.process.executable},
          {"hostname", r.process.hostname},
          {"start_unix_ns", r.process.start_unix_ns},
          {"duration_s", r.duration_s},
          {"exited", r.exited},
          {"trace_error", r.trace_error.empty()
                              ? json(nullptr)
                              : json{{"message", r.trace_error}, {"offset", r.trace_error_offset}}},
          {"damage", r.damage},
          {"verdict", verdict_json},
          {"torch_tracking", parsed_or_null(r.torch_tracking_json)},
          {"clock", parsed_or_null(r.clock_json)},
          {"distributed", parsed_or_null(r.distributed_json)},
          {"capture_backend", parsed_or_null(r.capture_backend_json)},
          {"framework_tracking", parsed_or_null(r.framework_tracking_json)},
          {"collector_disabled",
           r.collector_disabled.empty() ? json(nullptr) : json(r.collector_disabled)},
          {"device_memory_by_origin", origins},
          {"events",
           {{"allocations", r.allocations},
            {"frees", r.frees},
            {"unmatched_frees", r.unmatched_frees},
            {"lost", r.lost_events},
            {"lost_ranged_seqs", r.lost_ranged_seqs},
            {"lost_counted_seqs", r.lost_counted_seqs}}},
          {"peak_live_bytes", r.peak_live_bytes},
          {"leaks", leaks},
          {"out_of_memory", oom},
          {"growth", growth},
          {"timeline", timeline}};
}

json to_json(const std::vector<analysis::ProcessReport>& reports,
             const std::vector<analysis::UnusableTrace>& unusable) {
  json processes = json::array();
  for (const auto& r : reports) processes.push_back(to_json(r));
  json unusable_json = json::array();
  for (const auto& u : unusable)
    unusable_json.push_back({{"trace", u.trace_path}, {"error", u.error}});
  return {{"schema", kReportSchema}, {"processes", processes}, {"unusable_traces", unusable_json}};
}

}  // namespace gpuleak::report
