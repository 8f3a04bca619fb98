// The Perfetto export: Chrome's Trace Event Format (JSON object form), which
// ui.perfetto.dev and chrome://tracing open. Per process: counter tracks of
// live memory, the allocator's reserved memory, device memory in use and
// host RSS at each step boundary, one counter track per followed site
// (the growing ones, or the largest live ones when nothing grows), the
// steps as slices, and the last allocations and frees as instant events on
// the thread that made them. Timestamps are microseconds from the earliest
// process's start, so the processes of one job line up.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/model/live_set.h"
#include "quantity/units.h"
#include "report/exports/flame_stacks.h"
#include "report/exports/writers.h"

namespace gpuleak::report {

using nlohmann::json;

namespace {

// The track that holds the step slices: a thread id no kernel hands out.
constexpr std::uint32_t kStepsTrack = 0;

double offset_us(const analysis::ProcessReport& p, std::uint64_t first_start_unix_ns) {
  std::uint64_t start = p.process.start_unix_ns;
  return start > first_start_unix_ns ? static_cast<double>(start - first_start_unix_ns) / 1e3 : 0;
}

json counter(std::uint32_t pid, const std::string& name, double ts_us, const char* key,
             std::uint64_t value) {
  return {{"ph", "C"}, {"name", name}, {"pid", pid}, {"ts", ts_us}, {"args", {{key, value}}}};
}

std::string site_track_name(const analysis::ExportDetail& d, std::uint32_t site_id) {
  auto it = d.sites.find(site_id);
  std::string label = it != d.sites.end() ? it->second.label() : "?";
  return fmt::format("live bytes at {} (site {})", label, site_id);
}

void add_process(json& events, const analysis::ProcessReport& p, double base_us) {
  std::uint32_t pid = p.process.pid;
  events.push_back({{"ph", "M"},
                    {"name", "process_name"},
                    {"pid", pid},
                    {"args", {{"name", process_title(p)}}}});
  events.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", pid},
                    {"tid", kStepsTrack},
                    {"args", {{"name", "steps: " + p.growth.phase}}}});
  const analysis::Timeline& t = p.timeline;
  for (std::size_t i = 0; i < t.step.size(); ++i) {
    double ts = base_us + t.time_s[i] * 1e6;
    events.push_back(counter(pid, "live tensors", ts, "bytes", t.live_tensor_bytes[i]));
    events.push_back(counter(pid, "live device memory", ts, "bytes", t.live_device_bytes[i]));
    if (t.pool_reserved_bytes[i]) {
      events.push_back(counter(pid, "allocator reserved", ts, "bytes", *t.pool_reserved_bytes[i]));
    }
    if (t.device_used_bytes[i]) {
      events.push_back(counter(pid, "device memory used", ts, "bytes", *t.device_used_bytes[i]));
    }
    if (t.host_rss_bytes[i]) {
      events.push_back(counter(pid, "host RSS", ts, "bytes", *t.host_rss_bytes[i]));
    }
    if (p.export_detail && i < t.site_live_bytes.size()) {
      const auto& ids = p.export_detail->series_site_ids;
      for (std::size_t s = 0; s < ids.size() && s < t.site_live_bytes[i].size(); ++s) {
        events.push_back(counter(pid, site_track_name(*p.export_detail, ids[s]), ts, "bytes",
                                 t.site_live_bytes[i][s]));
      }
    }
    // A slice from this boundary to the next: one step, or the steps a
    // long run's sampled timeline leaves between two kept rows.
    if (i + 1 < t.step.size()) {
      double end = base_us + t.time_s[i + 1] * 1e6;
      std::uint64_t first = t.step[i] + 1, last = t.step[i + 1];
      std::string name =
          first >= last ? fmt::format("step {}", last) : fmt::format("steps {}-{}", first, last);
      events.push_back({{"ph", "X"},
                        {"name", name},
                        {"pid", pid},
                        {"tid", kStepsTrack},
                        {"ts", ts},
                        {"dur", std::max(0.0, end - ts)}});
    }
  }
  if (!p.export_detail) return;
  const analysis::ExportDetail& d = *p.export_detail;
  // A run without step boundaries (a short CUDA program) has no timeline:
  // when every event is here, its live memory is drawn from them instead.
  if (t.step.size() < 2 && !d.events.empty() && d.events.size() == d.events_total) {
    std::uint64_t tensors = 0, device = 0;
    for (const analysis::AllocationEvent& e : d.events) {
      auto apply = [&e](std::uint64_t& total) {
        total = e.is_alloc ? total + e.size : total - std::min(total, e.size);
      };
      if (analysis::is_tensor_kind(e.kind)) apply(tensors);
      if (analysis::occupies_device(e.kind)) apply(device);
      double ts = base_us + e.time_s * 1e6;
      if (analysis::is_tensor_kind(e.kind)) {
        events.push_back(counter(pid, "live tensors", ts, "bytes", tensors));
      }
      events.push_back(counter(pid, "live device memory", ts, "bytes", device));
    }
  }
  for (const auto& [tid, name] : d.thread_names) {
    if (name.empty()) continue;
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", tid},
                      {"args", {{"name", name}}}});
  }
  for (const analysis::AllocationEvent& e : d.events) {
    auto site = d.sites.find(e.stack_id);
    events.push_back({{"ph", "i"},
                      {"s", "t"},
                      {"name", fmt::format("{} {}", e.is_alloc ? "alloc" : "free",
                                           quantity::format_bytes(e.size))},
                      {"cat", trace::memory_kind_name(e.kind)},
                      {"pid", pid},
                      {"tid", e.thread_id},
                      {"ts", base_us + e.time_s * 1e6},
                      {"args",
                       {{"address", fmt::format("0x{:x}", e.address)},
                        {"bytes", e.size},
                        {"device", e.device},
                        {"site", site != d.sites.end() ? site->second.label() : "?"}}}});
  }
}

}  // namespace

void write_perfetto(const ProcessList& processes, const ExportOptions& options, std::ostream& out) {
  std::uint64_t first_start = UINT64_MAX;
  for (const analysis::ProcessReport* p : processes) {
    first_start = std::min(first_start, p->process.start_unix_ns);
  }
  json events = json::array();
  json left_out = json::array();
  for (const analysis::ProcessReport* p : processes) {
    add_process(events, *p, offset_us(*p, first_start));
    const analysis::Timeline& t = p->timeline;
    if (t.boundaries > t.step.size()) {
      left_out.push_back(fmt::format(
          "pid {}: counters at {} of {} step boundaries (a long run's timeline keeps the start, "
          "the end, the start of each growth and the extremes between)",
          p->process.pid, t.step.size(), t.boundaries));
    }
    if (p->export_detail && p->export_detail->events.size() < p->export_detail->events_total) {
      left_out.push_back(fmt::format(
          "pid {}: the first {} of {} allocations and frees (the last {} are here)", p->process.pid,
          p->export_detail->events_total - p->export_detail->events.size(),
          p->export_detail->events_total, p->export_detail->events.size()));
    }
  }
  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"metadata",
               {{"producer", options.producer},
                {"left_out", std::move(left_out)},
                {"time_origin", "microseconds from the start of the earliest process"}}}};
  out << doc.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

}  // namespace gpuleak::report
