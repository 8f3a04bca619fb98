// ProcessAnalysis, feeding it: records in sequence order through the
// iteration finder into the live set, the activity summary and every
// phase's growth tracker. The rest lives by concern: phase_boundaries.cpp,
// process_annotations.cpp, growth_verdict.cpp, phase_descriptions.cpp,
// process_report.cpp.
#include "analysis/process_analysis.h"

#include <algorithm>
#include <unordered_map>

namespace gpuleak::analysis {

using trace::MemoryKind;

ProcessAnalysis::ProcessAnalysis(AnalysisOptions options)
    : options_(std::move(options)), finder_(options_.step_finder) {
  catalog_.set_source_lookup(options_.source_lookup);
  if (options_.export_request) export_.emplace(*options_.export_request);
  if (options_.tracked_block) block_window_.emplace(*options_.tracked_block);
}

void ProcessAnalysis::set_trace_error(const std::string& message, std::uint64_t offset) {
  trace_error_ = message;
  trace_error_offset_ = offset;
}

void ProcessAnalysis::consume(const trace::Record& record) {
  activity_.consume(record);
  std::uint64_t seq = 0;
  if (!trace::record_seq(record, &seq)) {
    // Definitions name what events refer to; they are needed at once (the
    // iteration finder reads stacks), and their order does not matter.
    if (const auto* process = std::get_if<trace::ProcessRecord>(&record)) {
      process_ = *process;
      first_time_ns_ = process->start_monotonic_ns;
      next_window_ns_ = first_time_ns_ + static_cast<std::uint64_t>(options_.time_window_s * 1e9);
    } else if (const auto* compaction = std::get_if<trace::CompactionRecord>(&record)) {
      on_compaction(*compaction);
    } else if (const auto* step = std::get_if<trace::StepSummaryRecord>(&record)) {
      summarized_steps_.push_back(*step);
    } else {
      catalog_.add_definition(record);
    }
    return;
  }
  // An event the summary kept: the state at the compaction point (live
  // allocations, annotations, samples), applied as it is and never seen by
  // the iteration finder (the summary holds no loop to find).
  if (summarized(seq)) {
    if (const auto* annotation = std::get_if<trace::AnnotationRecord>(&record);
        annotation != nullptr && annotation->key == "holder") {
      holders_.add_answer(annotation->value);
      return;
    }
    apply(record);
    return;
  }
  // A holder answer is about sites, not about the moment it came: it takes
  // effect at once. Through the finder it would wait for the loop's next
  // iteration, which never comes when the answer is the program's last act
  // (the live watch would print its LEAK line without the holder).
  if (const auto* annotation = std::get_if<trace::AnnotationRecord>(&record);
      annotation != nullptr && annotation->key == "holder") {
    holders_.add_answer(annotation->value);
    return;
  }
  if (!options_.find_loops) {
    apply(record);
    return;
  }
  // Events go through the iteration finder, which hands them back in the
  // same order with the boundaries of the loops it found between them.
  finder_.push(record, catalog_);
  drain_finder();
}

void ProcessAnalysis::on_compaction(const trace::CompactionRecord& compaction) {
  compaction_ = compaction;
  next_seq_ = std::max(next_seq_, compaction.through_seq);
  allocations_ += compaction.allocations;
  summary_allocations_ += compaction.allocations;
  frees_ += compaction.frees;
  peak_live_bytes_ = std::max(peak_live_bytes_, compaction.peak_live_bytes);
  if (compaction.lost_events > 0) {
    // Lost before the compaction: the summary's live set may hold an
    // allocation whose free was lost, or miss one.
    lost_ += compaction.lost_events;
    events_missing_ = true;
  }
  // Time windows begin where the raw events do.
  std::uint64_t window_ns = static_cast<std::uint64_t>(options_.time_window_s * 1e9);
  if (compaction.through_time_ns > next_window_ns_)
    next_window_ns_ = compaction.through_time_ns + window_ns;
  if (compaction.through_time_ns > last_time_ns_) last_time_ns_ = compaction.through_time_ns;
}

void ProcessAnalysis::finish() {
  if (finished_) return;
  finished_ = true;
  finder_.finish(catalog_);
  drain_finder();
}

void ProcessAnalysis::drain_finder() {
  FinderItem item;
  while (finder_.pop(item)) {
    if (item.is_boundary) {
      // A loop found in the allocation stream marks steps inside the block only.
      if (block_window_ && !(block_window_->began() && !block_window_->ended())) continue;
      on_step_boundary({trace::StepSource::kAllocationPeriod, item.loop_id}, item.iteration,
                       item.time_ns);
    } else {
      apply(item.record);
    }
  }
}

void ProcessAnalysis::apply(const trace::Record& record) {
  std::uint64_t time_ns = std::visit(
      [](const auto& r) -> std::uint64_t {
        if constexpr (requires { r.time_ns; }) return r.time_ns;
        return 0;
      },
      record);
  if (time_ns > last_time_ns_) last_time_ns_ = time_ns;
  std::uint64_t seq = 0;
  bool kept_by_summary = trace::record_seq(record, &seq) && summarized(seq);
  if (kept_by_summary) {
    // Summarized numbers are sparse by design; the kept allocations were
    // counted with the summary's totals.
  } else if (trace::record_seq(record, &seq)) {
    // Sequence numbers are dense (the collector fills one that has no event
    // with an empty LostRecord): a jump is events dropped, or a damaged
    // trace; the iteration they fell in is judged without its changes.
    if (seq > next_seq_) {
      events_missing_ = true;
      for (auto& phase : phases_) phase->growth.on_lost(seq - next_seq_);
    }
    if (seq >= next_seq_) next_seq_ = seq + 1;
  }
  // Outside the tracked block, events count for nothing but the sequence.
  if (block_window_ && !block_window_->admits(record)) return;
  if (!std::holds_alternative<trace::StepRecord>(record) && !kept_by_summary)
    advance_time_windows(time_ns);

  std::visit(
      [this, kept_by_summary](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, trace::AllocRecord>) {
          if (!kept_by_summary) {
            ++allocations_;
          } else if (++summary_kept_allocations_ > summary_allocations_) {
            // A damaged summary keeps more live blocks than it says it
            // summarized: each one is still an allocation of the run.
            ++allocations_;
            ++summary_allocations_;
          }
          vmm_site_pairs_.on_alloc(r);
          if (r.kind == MemoryKind::kTorchBlock) pool_blocks_seen_ = true;
          LiveAllocation stale;
          if (live_.add(r, boundaries_, &stale)) {
            if (export_) export_->on_free(stale, nullptr, seconds_since_start(r.time_ns));
            // The block was handed out again: its free is not in the trace.
            // The sites forget it now, and when events were lost this step's
            // change is the late echo of a lost free, not growth.
            activity_.on_free(stale, r.time_ns);
            if (tracked_for_growth(stale.kind)) {
              for (auto& phase : phases_) phase->growth.on_free(stale);
            }
            if (events_missing_) {
              for (auto& phase : phases_) phase->growth.on_lost(0);
            }
          }
          LiveAllocation a = live_allocation_of(r, boundaries_);
          activity_.on_alloc(a, r.time_ns);
          if (tracked_for_growth(r.kind)) {
            for (auto& phase : phases_) phase->growth.on_alloc(a);
          }
          // Tensors lie inside the driver's allocations (the cache's segments)
          // or are driver allocations themselves (cudaMallocAsync): the two
          // totals overlap, and live memory is the larger of them.
          std::uint64_t live_now = std::max(live_.device_bytes(), live_.tensor_bytes());
          peak_live_bytes_ = std::max(peak_live_bytes_, live_now);
          if (export_) {
            export_->on_alloc(r, seconds_since_start(r.time_ns));
            if (export_->wants_peak(live_now)) {
              peak_totals_ = live_totals();
              export_->take_peak(live_now, seconds_since_start(r.time_ns));
            }
          }
        } else if constexpr (std::is_same_v<T, trace::FreeRecord>) {
          if (r.address == 0) return;
          ++frees_;
          auto removed = live_.remove(r);
          if (removed) activity_.on_free(*removed, r.time_ns);
          if (removed && export_) export_->on_free(*removed, &r, seconds_since_start(r.time_ns));
          if (!removed) {
            ++unmatched_frees_;
            // After lost events, a free that matches nothing is most likely
            // that of a lost allocation: the step it is in changes what the
            // loss left, and is judged as a lossy step.
            if (events_missing_) {
              for (auto& phase : phases_) phase->growth.on_lost(0);
            }
          } else if (tracked_for_growth(removed->kind)) {
            for (auto& phase : phases_) phase->growth.on_free(*removed);
          }
        } else if constexpr (std::is_same_v<T, trace::AllocFailedRecord>) {
          RawOutOfMemory oom;
          oom.record = r;
          oom.live_bytes = live_.bytes();
          oom.live_allocations = live_.count();
          std::unordered_map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> by_stack;
          live_.for_each([&](const LiveAllocation& a) {
            auto& entry = by_stack[a.stack_id];
            entry.first += a.size;
            entry.second += 1;
          });
          oom.top_stacks.assign(by_stack.begin(), by_stack.end());
          std::sort(oom.top_stacks.begin(), oom.top_stacks.end(),
                    [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
          if (oom.top_stacks.size() > 5) oom.top_stacks.resize(5);
          out_of_memory_.push_back(std::move(oom));
        } else if constexpr (std::is_same_v<T, trace::StepRecord>) {
          on_step_boundary({r.source, r.clock}, r.step, r.time_ns);
        } else if constexpr (std::is_same_v<T, trace::SampleRecord>) {
          switch (r.metric) {
            case trace::Metric::kHostRssBytes:
              host_rss_ = r.value;
              ++host_rss_samples_;
              break;
            case trace::Metric::kDeviceUsedBytes:
              device_used_ = r.value;
              ++device_used_samples_;
              break;
            case trace::Metric::kDeviceTotalBytes:
              device_total_ = r.value;
              break;
            case trace::Metric::kPoolReservedBytes:
            case trace::Metric::kTorchReservedBytes:
              pool_reserved_ = r.value;
              ++pool_reserved_samples_;
              break;
            case trace::Metric::kPoolUsedBytes:
              pool_used_ = r.value;
              ++pool_used_samples_;
              break;
            default:
              break;
          }
        } else if constexpr (std::is_same_v<T, trace::AnnotationRecord>) {
          on_annotation(r);
        } else if constexpr (std::is_same_v<T, trace::ExitRecord>) {
          exited_ = true;
        } else if constexpr (std::is_same_v<T, trace::LostRecord>) {
          lost_ += r.events;
          if (r.events > 0) {
            events_missing_ = true;
            // Counted by the sequence gap; this marks the iteration it is in.
            for (auto& phase : phases_) phase->growth.on_lost(0);
          }
        }
      },
      record);
}

bool ProcessAnalysis::is_pool_segment(std::uint32_t site_id) {
  std::string origin = catalog_.origin(site_id);
  // CuPy's segments are only set aside when its arrays are tracked one by
  // one; otherwise the segments are all that shows a CuPy leak.
  return origin == kCachingAllocatorOrigin || (origin == kCupyPoolOrigin && pool_blocks_seen_);
}

const HolderFinding* ProcessAnalysis::find_holder(std::uint32_t site_id) const {
  if (const HolderFinding* finding = holders_.find(site_id)) return finding;
  std::optional<std::uint32_t> mapping = vmm_site_pairs_.mapping_site_of(site_id);
  return mapping ? holders_.find(*mapping) : nullptr;
}

std::optional<HolderFinding> ProcessAnalysis::holder(std::uint32_t site_id) const {
  const HolderFinding* finding = find_holder(site_id);
  if (finding == nullptr) return std::nullopt;
  return *finding;
}

std::vector<std::uint32_t> ProcessAnalysis::detected_sites() const {
  std::vector<std::uint32_t> out;
  for (const auto& phase : phases_) {
    for (std::uint32_t site : phase->detection_order) {
      const HolderFinding* h = find_holder(site);
      if (h != nullptr && h->bounded) continue;
      if (std::find(out.begin(), out.end(), site) == out.end()) out.push_back(site);
    }
  }
  return out;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> ProcessAnalysis::recent_allocations(
    std::uint32_t site_id, std::size_t limit) const {
  std::vector<LiveAllocation> matching;
  std::uint64_t since = options_.growth.warmup_steps;
  live_.for_each([&](const LiveAllocation& a) {
    if (a.stack_id == site_id && a.step_index >= since) matching.push_back(a);
  });
  std::sort(matching.begin(), matching.end(),
            [](const auto& a, const auto& b) { return a.seq > b.seq; });
  if (matching.size() > limit) matching.resize(limit);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  out.reserve(matching.size());
  for (const auto& a : matching) out.emplace_back(a.address, a.size);
  return out;
}

}  // namespace gpuleak::analysis
