// ProcessAnalysis, the whole report of a process: the growth verdict with
// the device memory by origin, what is live at the end grouped by call site
// (the leaks, and what a pool or a suppression rule accounts for), the
// out-of-memory events, the timeline and how the process used CUDA.
#include <algorithm>
#include <map>

#include "analysis/process_analysis.h"

namespace gpuleak::analysis {

using trace::MemoryKind;

namespace {

// Live groups whose frames read the same (stacks that differ only in
// internal frames) are one group.
std::string frame_signature(const std::vector<Frame>& frames, MemoryKind kind) {
  std::string signature = trace::memory_kind_name(kind);
  bool any_user =
      std::any_of(frames.begin(), frames.end(), [](const Frame& f) { return !f.internal; });
  for (const Frame& f : frames) {
    if (any_user && f.internal) continue;
    signature += '\n' + f.function + '|' + f.file + '|' + std::to_string(f.line);
  }
  return signature;
}

}  // namespace

LeakGroup ProcessAnalysis::make_group(std::uint32_t stack_id) {
  LeakGroup g;
  g.stack_ids.push_back(stack_id);
  g.frames = catalog_.frames(stack_id);
  g.site = choose_site(g.frames);
  return g;
}

ProcessAnalysis::LiveTotals ProcessAnalysis::live_totals() const {
  LiveTotals totals;
  live_.for_each([&](const LiveAllocation& a) {
    auto& t = totals[{a.stack_id, a.kind}];
    t.first += a.size;
    t.second += 1;
  });
  return totals;
}

std::vector<LeakGroup> ProcessAnalysis::group_live(std::size_t limit) {
  // The API and device of each (stack, kind) come from its allocations.
  std::map<std::pair<std::uint32_t, MemoryKind>, std::pair<std::uint32_t, std::int32_t>> api_device;
  live_.for_each([&](const LiveAllocation& a) {
    api_device[{a.stack_id, a.kind}] = {a.api, a.device};
  });
  std::vector<LeakGroup> out = group_totals(live_totals(), limit);
  for (LeakGroup& g : out) {
    // group_totals leaves the API empty: name it from the last stack merged.
    auto it = api_device.find({g.stack_ids.back(), g.kind});
    if (it == api_device.end()) continue;
    g.api = catalog_.api_name(it->second.first);
    g.device = it->second.second;
  }
  return out;
}

std::vector<LeakGroup> ProcessAnalysis::group_totals(const LiveTotals& totals, std::size_t limit) {
  std::map<std::string, LeakGroup> merged;
  for (const auto& [key, t] : totals) {
    LeakGroup g = make_group(key.first);
    std::string signature = frame_signature(g.frames, key.second);
    auto [it, inserted] = merged.try_emplace(signature, std::move(g));
    LeakGroup& m = it->second;
    if (!inserted) m.stack_ids.push_back(key.first);
    m.bytes += t.first;
    m.allocations += t.second;
    m.kind = key.second;
  }
  for (auto& [signature, g] : merged) {
    std::string origin = catalog_.origin(g.stack_ids.front());
    g.pool_segment = !is_tensor_kind(g.kind) && pool_blocks_seen_ &&
                     (origin == kCachingAllocatorOrigin || origin == kCupyPoolOrigin);
  }
  std::vector<LeakGroup> out;
  out.reserve(merged.size());
  for (auto& [signature, g] : merged) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.allocations > b.allocations;
  });
  if (limit && out.size() > limit) out.resize(limit);
  return out;
}

// What a tracked block left allocated is what a test or a notebook cell
// asks about: a few addresses of each group let the package walk for its
// holder (python/gpuleak/tracking.py), whose answer then shows here.
void ProcessAnalysis::describe_left_behind(std::vector<LeakGroup>& groups) const {
  constexpr std::size_t kSampleBlocks = 16;
  std::map<std::uint32_t, LeakGroup*> group_of_stack;
  for (LeakGroup& g : groups) {
    for (std::uint32_t id : g.stack_ids) group_of_stack[id] = &g;
    if (!g.stack_ids.empty()) {
      if (const HolderFinding* h = find_holder(g.stack_ids.front())) g.holder = h->answer;
    }
  }
  live_.for_each([&](const LiveAllocation& a) {
    auto it = group_of_stack.find(a.stack_id);
    if (it == group_of_stack.end() || it->second->kind != a.kind) return;
    auto& sample = it->second->sample_blocks;
    if (sample.size() < kSampleBlocks) sample.emplace_back(a.address, a.size);
  });
}

ProcessReport ProcessAnalysis::build_report(const std::string& trace_path) {
  finish();
  ProcessReport r;
  r.trace_path = trace_path;
  r.process = process_;
  r.exited = exited_;
  r.trace_error = trace_error_;
  r.trace_error_offset = trace_error_offset_;
  r.damage = damage_;
  r.torch_tracking = torch_tracking_;
  r.clock = clock_;
  r.distributed = distributed_;
  r.capture_backend = capture_backend_;
  r.framework_tracking = framework_tracking_;
  r.python_loop = python_loop_;
  r.attach = attach_;
  r.collector_disabled = collector_disabled_;
  if (block_window_) {
    r.tracked_block =
        TrackedBlockReport{block_window_->block(), block_window_->began(), block_window_->ended()};
  }
  std::map<std::string, OriginShare> origins;
  const Phase* primary = nullptr;
  r.growth = growth_report_of_phases(&primary);
  auto add_origin = [&](std::uint32_t site, MemoryKind kind, std::uint64_t bytes) {
    if (!occupies_device(kind) && kind != MemoryKind::kTorchBlock) return;
    if (kind == MemoryKind::kTorchBlock) return;  // inside the cache's segments, counted there
    std::string origin =
        is_tensor_kind(kind) ? "PyTorch tensors (one driver call each)" : catalog_.origin(site);
    if (origin.empty()) origin = "other code calling the CUDA driver";
    OriginShare& share = origins[origin];
    share.origin = origin;
    share.bytes += bytes;
    share.tensors = is_tensor_kind(kind);
  };
  if (primary != nullptr) {
    primary->growth.for_each_site_at_last_boundary(add_origin);
  } else {
    // No boundary at all: what is live now.
    std::map<std::pair<std::uint32_t, MemoryKind>, std::uint64_t> live_by_site;
    live_.for_each([&](const LiveAllocation& a) {
      if (tracked_for_growth(a.kind)) live_by_site[{a.stack_id, a.kind}] += a.size;
    });
    for (const auto& [key, bytes] : live_by_site) add_origin(key.first, key.second, bytes);
  }
  for (auto& [name, share] : origins) r.device_memory_by_origin.push_back(share);
  std::sort(r.device_memory_by_origin.begin(), r.device_memory_by_origin.end(),
            [](const OriginShare& a, const OriginShare& b) { return a.bytes > b.bytes; });
  r.allocations = allocations_;
  r.frees = frees_;
  r.unmatched_frees = unmatched_frees_;
  r.lost_events = lost_;
  if (compaction_) {
    TraceCompactionReport c;
    c.compactions = compaction_->compactions;
    c.summarized_until_s = seconds_since_start(compaction_->through_time_ns);
    c.dropped_events = compaction_->dropped_events;
    c.summarized_steps = compaction_->steps;
    c.step_resolution = compaction_->step_resolution;
    c.bound_bytes = compaction_->bound_bytes;
    c.steps.reserve(summarized_steps_.size());
    for (const auto& step : summarized_steps_)
      c.steps.push_back({seconds_since_start(step.time_ns), step.step, step.live_bytes});
    r.compaction = std::move(c);
  }
  r.lost_ranged_seqs = lost_ranged_seqs_;
  r.lost_counted_seqs = lost_counted_seqs_;
  r.peak_live_bytes = peak_live_bytes_;
  r.duration_s = last_time_ns_ > first_time_ns_
                     ? static_cast<double>(last_time_ns_ - first_time_ns_) / 1e9
                     : 0;

  std::vector<LeakGroup> live_groups = group_live(0);
  if (block_window_) describe_left_behind(live_groups);
  for (LeakGroup& g : live_groups) {
    std::string origin = g.stack_ids.empty() ? "" : catalog_.origin(g.stack_ids.front());
    if (!is_tensor_kind(g.kind) && origin == kCachingAllocatorOrigin) {
      g.suppressed = true;
      g.suppressed_by = "cached by PyTorch's caching allocator (released when the process exits)";
    } else if (g.pool_segment && origin == kCupyPoolOrigin) {
      g.suppressed = true;
      g.suppressed_by =
          "cached by CuPy's memory pool (free_all_blocks() or the process's exit releases it)";
    } else if (auto rule = options_.suppressions.match(g)) {
      g.suppressed = true;
      g.suppressed_by = *rule;
    }
    if (g.suppressed) {
      r.leaks.suppressed_bytes += g.bytes;
      r.leaks.suppressed_allocations += g.allocations;
      r.leaks.suppressed_groups.push_back(std::move(g));
    } else {
      r.leaks.bytes += g.bytes;
      r.leaks.allocations += g.allocations;
      r.leaks.groups.push_back(std::move(g));
    }
  }

  for (const RawOutOfMemory& raw : out_of_memory_) {
    OutOfMemoryEvent e;
    e.time_s = raw.record.time_ns > first_time_ns_
                   ? static_cast<double>(raw.record.time_ns - first_time_ns_) / 1e9
                   : 0;
    e.requested_bytes = raw.record.size;
    e.api = catalog_.api_name(raw.record.api);
    e.device = raw.record.device;
    e.result = raw.record.result;
    e.live_bytes = raw.live_bytes;
    e.live_allocations = raw.live_allocations;
    e.frames = catalog_.frames(raw.record.stack_id);
    e.site = choose_site(e.frames);
    for (const auto& [stack_id, totals] : raw.top_stacks) {
      LeakGroup g = make_group(stack_id);
      g.bytes = totals.first;
      g.allocations = totals.second;
      e.largest_live.push_back(std::move(g));
    }
    r.out_of_memory.push_back(std::move(e));
  }

  if (primary != nullptr) r.timeline = primary->timeline.timeline();
  r.cuda_use = activity_.summary();
  if (export_) r.export_detail = export_detail();
  return r;
}

ExportDetail ProcessAnalysis::export_detail() {
  const ExportRequest& request = export_->request();
  ExportDetail d;
  d.series_site_ids = request.series_site_ids;  // the recorder kept at most kMaxSeriesSites
  d.peak_time_s = export_->peak_time_s();
  d.peak_bytes = export_->peak_bytes();
  // Every group at the peak: a flame graph of the peak needs them all (the
  // bound keeps a pathological trace's export finite).
  constexpr std::size_t kMaxPeakGroups = 20000;
  d.live_at_peak = group_totals(peak_totals_, kMaxPeakGroups);
  d.events = export_->events();
  d.events_total = export_->events_total();
  d.live_blocks_total = live_.count();
  if (request.max_live_blocks > 0) {
    live_.for_each([&](const LiveAllocation& a) {
      if (d.live_blocks.size() >= request.max_live_blocks) return;
      d.live_blocks.push_back({a.address, a.size, a.kind, a.device, a.stack_id, a.step_index});
    });
    std::sort(d.live_blocks.begin(), d.live_blocks.end(),
              [](const LiveBlock& a, const LiveBlock& b) { return a.address < b.address; });
  }
  auto describe = [&](std::uint32_t stack_id) {
    if (d.frames.count(stack_id)) return;
    std::vector<Frame> frames = catalog_.frames(stack_id);
    d.sites[stack_id] = choose_site(frames);
    d.origins[stack_id] = catalog_.origin(stack_id);
    d.frames[stack_id] = std::move(frames);
  };
  for (const AllocationEvent& e : d.events) {
    describe(e.stack_id);
    if (!d.thread_names.count(e.thread_id))
      d.thread_names[e.thread_id] = catalog_.thread_name(e.thread_id);
  }
  for (const LiveBlock& b : d.live_blocks) describe(b.stack_id);
  for (std::uint32_t id : d.series_site_ids) describe(id);
  return d;
}

}  // namespace gpuleak::analysis
