// The memory timeline of a run, one row per step boundary, kept in bounded
// memory however long the run is, for the plots of the JSON and HTML
// reports.
//
// A run of up to kHeadRows + kSpans + kTailRows boundaries (2,560) keeps
// every row. A longer one keeps every row where a reader zooms in: the first `kHeadRows` boundaries
// (the warm-up and early growth), the last `kTailRows` (what happens now), and the `kTailRows`
// before each moment pin() was called (the analysis pins the moments a site was first found
// growing, so the start of a leak is there in full); the rest is summarized in at most `kSpans`
// equal spans, each giving its rows with the lowest and highest live memory and the highest pool
// and host memory, so no peak or dip disappears. Every row in the output is a real boundary's
// values, never an average.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

struct TimelineRow {
  std::uint64_t index = 0;  // boundary index (0, 1, ...)
  std::uint64_t step = 0;
  double time_s = 0;
  std::uint64_t live_tensor_bytes = 0;
  std::uint64_t live_device_bytes = 0;
  std::optional<std::uint64_t> pool_reserved_bytes;
  std::optional<std::uint64_t> device_used_bytes;
  std::optional<std::uint64_t> host_rss_bytes;
  std::vector<std::uint64_t> site_live_bytes;  // the sites an export follows (export_detail.h)
};

class TimelineSampler {
 public:
  static constexpr std::size_t kHeadRows = 512;
  static constexpr std::size_t kTailRows = 1024;
  static constexpr std::size_t kSpans = 1024;
  static constexpr std::size_t kMaxPins = 4;

  // Appends the next boundary's row (its index is the number added so far).
  void add(TimelineRow row);
  // Keeps the last kTailRows rows in full (at most kMaxPins times).
  void pin();
  void clear() { *this = TimelineSampler{}; }
  std::uint64_t rows() const { return added_; }

  // The kept rows in order, as the report's parallel arrays.
  Timeline timeline() const;

 private:
  // A span of rows between head and tail: its extreme rows.
  struct Span {
    std::uint64_t first = 0, last = 0;  // boundary indices covered
    std::vector<TimelineRow> extremes;  // at most four, by index
  };
  void add_to_spans(const TimelineRow& row);
  static Span merge(const Span& a, const Span& b);

  std::uint64_t added_ = 0;
  std::vector<TimelineRow> head_;
  std::vector<TimelineRow> tail_;  // ring of kTailRows
  std::vector<std::vector<TimelineRow>> pinned_;
  std::vector<Span> spans_;
  std::uint64_t span_rows_ = 1;  // rows per span, doubling
};

}  // namespace gpuleak::analysis
