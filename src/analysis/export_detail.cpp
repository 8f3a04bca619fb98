#include "analysis/export_detail.h"

#include <algorithm>

namespace gpuleak::analysis {

ExportRecorder::ExportRecorder(ExportRequest request) : request_(std::move(request)) {
  if (request_.series_site_ids.size() > kMaxSeriesSites) {
    request_.series_site_ids.resize(kMaxSeriesSites);
  }
  for (std::size_t i = 0; i < request_.series_site_ids.size(); ++i) {
    series_column_.emplace(request_.series_site_ids[i], i);
  }
  series_bytes_.assign(request_.series_site_ids.size(), 0);
  ring_.reserve(std::min<std::size_t>(request_.max_events, 4096));
}

void ExportRecorder::on_alloc(const trace::AllocRecord& record, double time_s) {
  if (auto it = series_column_.find(record.stack_id); it != series_column_.end()) {
    series_bytes_[it->second] += record.size;
  }
  AllocationEvent e;
  e.time_s = time_s;
  e.is_alloc = true;
  e.kind = record.kind;
  e.address = record.address;
  e.size = record.size;
  e.device = record.device;
  e.stream = record.stream;
  e.thread_id = record.thread_id;
  e.stack_id = record.stack_id;
  push_event(e);
}

void ExportRecorder::on_free(const LiveAllocation& freed, const trace::FreeRecord* record,
                             double time_s) {
  if (auto it = series_column_.find(freed.stack_id); it != series_column_.end()) {
    std::uint64_t& bytes = series_bytes_[it->second];
    bytes -= std::min(bytes, freed.size);
  }
  AllocationEvent e;
  e.time_s = time_s;
  e.is_alloc = false;
  e.kind = freed.kind;
  e.address = freed.address;
  e.size = freed.size;
  e.device = freed.device;
  e.thread_id = record != nullptr ? record->thread_id : 0;
  e.stack_id = freed.stack_id;
  push_event(e);
}

void ExportRecorder::take_peak(std::uint64_t live_now, double time_s) {
  peak_taken_ = true;
  peak_time_s_ = time_s;
  peak_bytes_ = live_now;
}

std::vector<std::uint64_t> ExportRecorder::series_values() const { return series_bytes_; }

void ExportRecorder::push_event(const AllocationEvent& event) {
  ++events_total_;
  if (request_.max_events == 0) return;
  if (ring_.size() < request_.max_events) {
    ring_.push_back(event);
    return;
  }
  ring_[ring_next_] = event;
  ring_next_ = (ring_next_ + 1) % request_.max_events;
}

std::vector<AllocationEvent> ExportRecorder::events() const {
  if (ring_.size() < request_.max_events || ring_next_ == 0) return ring_;
  std::vector<AllocationEvent> out;
  out.reserve(ring_.size());
  out.insert(out.end(), ring_.begin() + static_cast<std::ptrdiff_t>(ring_next_), ring_.end());
  out.insert(out.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(ring_next_));
  return out;
}

}  // namespace gpuleak::analysis
