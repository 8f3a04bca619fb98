#include "report/json_report.h"

#include "analysis/processes/job_ranks.h"
#include "analysis/processes/process_verdict.h"
#include "report/process_finding_text.h"

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

template <class T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json optional_series(const std::vector<std::optional<std::uint64_t>>& values) {
  json out = json::array();
  for (const auto& v : values) out.push_back(optional_json(v));
  return out;
}

// A field of an annotation's object: written when the trace had it (of the
// right type), left out when not.
template <class T>
void put_if_known(json& object, const char* key, const std::optional<T>& value) {
  if (value) object[key] = *value;
}

// The annotations in the shape the process writes them (docs/json-schema.md):
// null when there was none, a field left out when it was missing or of the
// wrong type. `hook_error` is always there: null says the hook had no error.
json torch_tracking_json(const std::optional<analysis::TorchTracking>& t) {
  if (!t) return nullptr;
  json j = json::object();
  put_if_known(j, "mode", t->mode);
  put_if_known(j, "alloc_conf", t->alloc_conf);
  put_if_known(j, "torch", t->torch);
  j["hook_error"] = optional_json(t->hook_error);
  return j;
}

json clock_json(const std::optional<analysis::EventClock>& c) {
  if (!c) return nullptr;
  json j = json::object();
  put_if_known(j, "clock", c->clock);
  put_if_known(j, "resolution_ns", c->resolution_ns);
  put_if_known(j, "monotonic_read_ns", c->monotonic_read_ns);
  return j;
}

json distributed_json(const std::optional<analysis::DistributedRank>& d) {
  if (!d) return nullptr;
  json j = json::object();
  put_if_known(j, "rank", d->rank);
  put_if_known(j, "local_rank", d->local_rank);
  put_if_known(j, "world_size", d->world_size);
  put_if_known(j, "launcher", d->launcher);
  return j;
}

json capture_backend_json(const std::optional<analysis::CaptureBackend>& b) {
  if (!b) return nullptr;
  json j = json::object();
  put_if_known(j, "name", b->name);
  put_if_known(j, "reason", b->reason);
  put_if_known(j, "interposer_loaded", b->interposer_loaded);
  put_if_known(j, "interposer_loaded_before_driver", b->interposer_loaded_before_driver);
  put_if_known(j, "start_requests", b->start_requests);
  put_if_known(j, "reentrant_start_requests", b->reentrant_start_requests);
  return j;
}

json framework_tracking_json(const std::optional<analysis::FrameworkTracking>& f) {
  if (!f) return nullptr;
  json j = json::object();
  put_if_known(j, "framework", f->framework);
  put_if_known(j, "mode", f->mode);
  put_if_known(j, "hidden_allocations", f->hidden_allocations);
  put_if_known(j, "device_memory_holds_arrays", f->device_memory_holds_arrays);
  put_if_known(j, "version", f->version);
  put_if_known(j, "how_to_see", f->how_to_see);
  put_if_known(j, "mem_fraction", f->mem_fraction);
  return j;
}

json compaction_json(const std::optional<analysis::TraceCompactionReport>& c) {
  if (!c) return nullptr;
  json steps = json::array();
  for (const auto& step : c->steps)
    steps.push_back({{"t", step.time_s}, {"step", step.step}, {"live_bytes", step.live_bytes}});
  return {{"compactions", c->compactions},
          {"summarized_until_s", c->summarized_until_s},
          {"dropped_events", c->dropped_events},
          {"summarized_steps", c->summarized_steps},
          {"step_resolution", c->step_resolution},
          {"bound_bytes", c->bound_bytes},
          {"steps", steps}};
}

json python_loop_json(const std::optional<analysis::PythonLoopAnnotation>& p) {
  if (!p) return nullptr;
  json j = json::object();
  put_if_known(j, "available", p->available);
  put_if_known(j, "reason", p->reason);
  put_if_known(j, "script", p->script);
  put_if_known(j, "tool_id", p->tool_id);
  put_if_known(j, "code_objects", p->code_objects);
  return j;
}

json attach_json(const std::optional<analysis::AttachSession>& a) {
  if (!a) return nullptr;
  json j = {{"detached", a->detached}};
  put_if_known(j, "end_reason", a->end_reason);
  put_if_known(j, "steps", a->steps);
  put_if_known(j, "baseline_torch_allocated_bytes", a->baseline_torch_allocated_bytes);
  return j;
}

// The holder answer in the shape the Python package writes it
// (docs/python.md, "Answer fields per site"): the fields it always writes
// are always here (null when unknown), those it adds only sometimes only
// when set.
json holder_json(const std::optional<analysis::HolderAnswer>& answer) {
  if (!answer) return nullptr;
  json holder = nullptr;
  if (const auto& h = answer->holder) {
    holder = {{"type", h->type},
              {"name", h->name},
              {"owner", h->owner},
              {"path", h->path},
              {"length", optional_json(h->length)},
              {"bounded", h->bounded},
              {"maxlen", optional_json(h->maxlen)}};
    if (h->filled_by) holder["filled_by"] = *h->filled_by;
    if (h->element) holder["element"] = *h->element;
    if (h->held_in) holder["held_in"] = *h->held_in;
    if (const auto& k = h->kept_at) {
      holder["kept_at"] = {{"file", k->file},
                           {"line", optional_json(k->line)},
                           {"statement", optional_json(k->statement)},
                           {"kind", k->kind},
                           {"function", k->function},
                           {"in_loop", k->in_loop}};
      if (const auto& c = k->called_from) {
        holder["kept_at"]["called_from"] = {{"file", c->file},
                                            {"line", optional_json(c->line)},
                                            {"statement", optional_json(c->statement)},
                                            {"function", c->function}};
      }
    }
  }
  json out = {{"site_id", answer->site_id},
              {"matched_addresses", answer->matched_addresses},
              {"kind", answer->kind},
              {"holder", holder},
              {"graph_tensors_per_element", optional_json(answer->graph_tensors_per_element)},
              {"element_has_grad_fn", answer->element_has_grad_fn},
              {"fix", optional_json(answer->fix)}};
  if (answer->cause) out["cause"] = *answer->cause;
  if (answer->note) out["note"] = *answer->note;
  if (answer->walk_timed_out) out["timed_out"] = true;
  return out;
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
  if (!g.sample_blocks.empty()) j["sample_blocks"] = g.sample_blocks;
  if (g.holder) j["holder"] = holder_json(g.holder);
  return j;
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
  auto site_growth_json = [](const analysis::SiteGrowth& s) {
    return json{{"site_id", s.site_id},
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
                {"frames", frames_json(s.frames)}};
  };
  json sites = json::array();
  for (const auto& s : g.sites) sites.push_back(site_growth_json(s));
  json rising_sites = json::array();
  for (const auto& s : g.rising_sites) rising_sites.push_back(site_growth_json(s));
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
  json growth = {
      {"verdict", analysis::verdict_name(g.verdict)},
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
      {"detection_floor_bytes_per_step", optional_json(g.detection_floor_bytes_per_step)},
      {"device_total_bytes", optional_json(g.device_total_bytes)},
      {"cause", g.cause.empty() ? json(nullptr) : json(g.cause)},
      {"cause_text", g.cause_text},
      {"where", analysis::where_name(g.where)},
      {"host_rss_bytes_per_step", g.host_rss_bytes_per_step},
      {"pool_reserved_bytes_per_step", g.pool_reserved_bytes_per_step},
      {"holder", holder_json(g.holder)},
      {"fix", g.fix},
      {"note", g.note},
      {"pool_judged", g.pool_judged},
      {"lossy_steps", g.lossy_steps},
      {"window_steps", g.window_steps},
      {"sites", sites},
      {"rising_sites", rising_sites}};

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
          {"torch_tracking", torch_tracking_json(r.torch_tracking)},
          {"clock", clock_json(r.clock)},
          {"distributed", distributed_json(r.distributed)},
          {"capture_backend", capture_backend_json(r.capture_backend)},
          {"framework_tracking", framework_tracking_json(r.framework_tracking)},
          {"python_loop", python_loop_json(r.python_loop)},
          {"attach", attach_json(r.attach)},
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
          {"compaction", compaction_json(r.compaction)},
          {"leaks", leaks},
          {"out_of_memory", oom},
          {"growth", growth},
          {"timeline", timeline},
          {"tracked_block", r.tracked_block ? json{{"block", r.tracked_block->block},
                                                   {"found", r.tracked_block->found},
                                                   {"ended", r.tracked_block->ended}}
                                            : json(nullptr)}};
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

namespace {

json first_use_json(const analysis::CudaFirstUse& use) {
  return {{"time_s", use.time_s},
          {"device", use.device},
          {"context_created", use.context_created},
          {"site", site_json(use.site)},
          {"frames", frames_json(use.frames)}};
}

json device_memory_json(const analysis::DeviceMemoryView& m) {
  if (m.samples == 0) return nullptr;
  return {{"samples", m.samples},
          {"peak_used_bytes", m.peak_used_bytes},
          {"peak_time_s", m.peak_time_s},
          {"context_and_modules_bytes", m.context_and_modules_bytes},
          {"allocator_reserved_bytes", m.allocator_reserved_bytes},
          {"tensor_bytes", m.tensor_bytes},
          {"other_driver_bytes", m.other_driver_bytes},
          {"unexplained_bytes", m.unexplained_bytes},
          {"timeline", {{"time_s", m.time_s}, {"used_bytes", m.used_bytes}}}};
}

json job_process_json(const analysis::JobProcess& p,
                      const std::vector<analysis::ProcessReport>& reports) {
  return {{"pid", p.pid},
          {"host", p.host.empty() ? json(nullptr) : json(p.host)},
          {"parent_pid", p.parent_pid},
          {"command_line", p.command_line},
          {"role", analysis::role_kind_name(p.role.kind)},
          {"role_text", p.role.text},
          {"of_pid", p.role.of_pid > 0 ? json(p.role.of_pid) : json(nullptr)},
          {"trace", p.report_index >= 0
                        ? json(reports[static_cast<std::size_t>(p.report_index)].trace_path)
                        : json(nullptr)},
          {"cuda_initialized", p.cuda_initialized},
          {"gpu_work", p.gpu_work},
          {"summary", process_memory_text(p)},
          {"cuda_first_use", p.first_use ? first_use_json(*p.first_use) : json(nullptr)},
          {"device_memory", device_memory_json(p.device_memory)},
          {"first_seen_s", optional_json(p.first_seen_s)},
          {"last_seen_s", optional_json(p.last_seen_s)},
          {"zombie_seconds", p.zombie_seconds},
          {"alive_at_end", p.alive_at_end}};
}

json finding_json(const analysis::ProcessFinding& f, const analysis::JobReport& job) {
  return {{"kind", f.kind},
          {"summary", finding_summary(f, job)},
          {"details", finding_details(f, job)},
          {"pids", f.pids},
          {"host", f.host.empty() ? json(nullptr) : json(f.host)},
          {"of_pid", f.of_pid > 0 ? json(f.of_pid) : json(nullptr)},
          {"role", analysis::role_kind_name(f.role)},
          {"memory_known", f.memory_known},
          {"bytes_each", f.bytes_each},
          {"bytes_total", f.bytes_total},
          {"at_once", f.at_once},
          {"seconds", f.seconds},
          {"cuda_first_use", f.first_use ? site_json(*f.first_use) : json(nullptr)},
          {"cuda_first_use_in", f.first_use_in.empty() ? json(nullptr) : json(f.first_use_in)},
          {"fix", f.fix}};
}

// The job's ranks across hosts (analysis/processes/job_ranks.h), or null.
json ranks_json(const std::vector<analysis::ProcessReport>& reports) {
  std::optional<analysis::JobRanks> ranks = analysis::job_ranks(reports);
  if (!ranks) return nullptr;
  json entries = json::array();
  for (const analysis::RankEntry& e : ranks->ranks) {
    entries.push_back({{"rank", e.rank},
                       {"host", e.host},
                       {"pid", e.pid},
                       {"launcher", e.launcher.empty() ? json(nullptr) : json(e.launcher)},
                       {"leak", e.leak},
                       {"rate_bytes_per_step", e.rate_bytes_per_step},
                       {"site", e.site.empty() ? json(nullptr) : json(e.site)}});
  }
  return {{"hosts", ranks->hosts},
          {"ranks", entries},
          {"repeated", ranks->repeated},
          {"text", analysis::job_ranks_text(*ranks)}};
}

}  // namespace

json to_json(const std::vector<analysis::ProcessReport>& reports, const analysis::JobReport& job,
             const std::vector<analysis::UnusableTrace>& unusable) {
  json out = to_json(reports, unusable);
  for (const analysis::JobProcess& p : job.processes) {
    if (p.report_index < 0) continue;
    json& entry = out["processes"][static_cast<std::size_t>(p.report_index)];
    entry["role"] = analysis::role_kind_name(p.role.kind);
    entry["role_text"] = p.role.text;
    entry["gpu_work"] = p.gpu_work;
  }
  json processes = json::array(), findings = json::array();
  for (const auto& p : job.processes) processes.push_back(job_process_json(p, reports));
  for (const auto& f : job.findings) findings.push_back(finding_json(f, job));
  out["job"] = {
      {"main_pid", job.main_pid},
      {"main_host", job.main_host.empty() ? json(nullptr) : json(job.main_host)},
      {"duration_s", job.duration_s},
      {"main_exit_s", optional_json(job.main_exit_s)},
      {"main_exit_status", job.main_exit_status >= 0 ? json(job.main_exit_status) : json(nullptr)},
      {"grace_period_s", job.grace_period_s},
      {"observed", job.observed},
      {"nvml_note", job.nvml_note.empty() ? json(nullptr) : json(job.nvml_note)},
      {"notes", job.notes},
      {"processes", processes},
      {"findings", findings},
      {"ranks", ranks_json(reports)}};
  return out;
}

}  // namespace gpuleak::report
