// What the exports of a report (report/exports.h: memory_viz, Perfetto,
// speedscope, folded stacks, pprof, CSV) need beyond the report itself, and
// the recorder that keeps it while the analysis reads a trace.
//
// The report says which sites grow and how much was live at the peak only
// once the trace has been read, while the exports want each growing site's
// live bytes at every step and the live set *at* the peak. So an export
// reads the trace twice with the same analysis: the first pass gives the
// report, the second is asked (ExportRequest) to keep those sites' series in
// the timeline rows and to group what is live when live memory first
// reaches the first pass's peak. Nothing here judges anything: the verdicts
// and sites are the first pass's.
//
// Every part is bounded (the request says how much); what a bound left out
// is counted, and each export names it in its own metadata.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model/live_set.h"
#include "analysis/model/report_model.h"
#include "trace/records.h"

namespace gpuleak::analysis {

struct ExportRequest {
  // Sites whose live bytes every timeline row carries (Timeline::site_live_bytes).
  std::vector<std::uint32_t> series_site_ids;
  // Group what is live when live memory (ProcessReport::peak_live_bytes)
  // first reaches this many bytes; 0: not asked.
  std::uint64_t peak_bytes = 0;
  // Keep the last this many allocations and frees (0: none).
  std::size_t max_events = 0;
  // Keep at most this many of the allocations live at the end (0: none).
  std::size_t max_live_blocks = 0;
};

// At most this many sites get a series: a chart or a counter track per site
// is read for the few that grow, not for thousands.
inline constexpr std::size_t kMaxSeriesSites = 64;

// Keeps what an ExportRequest asks for as ProcessAnalysis applies records.
class ExportRecorder {
 public:
  explicit ExportRecorder(ExportRequest request);

  // An allocation was added to the live set.
  void on_alloc(const trace::AllocRecord& record, double time_s);
  // An allocation left the live set (freed, or replaced by one at its address).
  void on_free(const LiveAllocation& freed, const trace::FreeRecord* record, double time_s);
  // Whether the peak group should be taken now; `live_now` is
  // max(device bytes, tensor bytes). The caller groups the live set.
  bool wants_peak(std::uint64_t live_now) const {
    return request_.peak_bytes > 0 && !peak_taken_ && live_now >= request_.peak_bytes;
  }
  void take_peak(std::uint64_t live_now, double time_s);
  // The series sites' live bytes now, in the order of series_site_ids.
  std::vector<std::uint64_t> series_values() const;

  const ExportRequest& request() const { return request_; }
  std::optional<double> peak_time_s() const { return peak_time_s_; }
  std::uint64_t peak_bytes() const { return peak_bytes_; }
  // The kept events, oldest first.
  std::vector<AllocationEvent> events() const;
  std::uint64_t events_total() const { return events_total_; }

 private:
  void push_event(const AllocationEvent& event);

  ExportRequest request_;
  std::unordered_map<std::uint32_t, std::size_t> series_column_;
  std::vector<std::uint64_t> series_bytes_;
  std::vector<AllocationEvent> ring_;
  std::size_t ring_next_ = 0;
  std::uint64_t events_total_ = 0;
  bool peak_taken_ = false;
  std::optional<double> peak_time_s_;
  std::uint64_t peak_bytes_ = 0;
};

}  // namespace gpuleak::analysis
