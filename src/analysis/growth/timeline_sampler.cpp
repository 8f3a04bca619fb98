#include "analysis/growth/timeline_sampler.h"

#include <algorithm>

namespace gpuleak::analysis {

namespace {

std::uint64_t live(const TimelineRow& r) { return r.live_tensor_bytes + r.live_device_bytes; }

// The rows worth keeping of a span: lowest and highest live memory, highest
// pool reserved and host RSS; by index, without repeats.
std::vector<TimelineRow> extremes_of(const std::vector<TimelineRow>& rows) {
  if (rows.empty()) return {};
  const TimelineRow* low = &rows[0];
  const TimelineRow* high = &rows[0];
  const TimelineRow* reserved = nullptr;
  const TimelineRow* rss = nullptr;
  for (const TimelineRow& r : rows) {
    if (live(r) < live(*low)) low = &r;
    if (live(r) > live(*high)) high = &r;
    if (r.pool_reserved_bytes &&
        (!reserved || *r.pool_reserved_bytes > *reserved->pool_reserved_bytes))
      reserved = &r;
    if (r.host_rss_bytes && (!rss || *r.host_rss_bytes > *rss->host_rss_bytes)) rss = &r;
  }
  std::vector<TimelineRow> out;
  for (const TimelineRow* r : {low, high, reserved, rss}) {
    if (!r) continue;
    bool seen = std::any_of(out.begin(), out.end(),
                            [&](const TimelineRow& o) { return o.index == r->index; });
    if (!seen) out.push_back(*r);
  }
  std::sort(out.begin(), out.end(),
            [](const TimelineRow& a, const TimelineRow& b) { return a.index < b.index; });
  return out;
}

}  // namespace

TimelineSampler::Span TimelineSampler::merge(const Span& a, const Span& b) {
  std::vector<TimelineRow> both = a.extremes;
  both.insert(both.end(), b.extremes.begin(), b.extremes.end());
  return Span{a.first, b.last, extremes_of(both)};
}

void TimelineSampler::add_to_spans(const TimelineRow& row) {
  if (spans_.empty() || spans_.back().last - spans_.back().first + 1 >= span_rows_) {
    if (spans_.size() >= kSpans) {
      // Twice as many rows per span: merge neighbours.
      std::vector<Span> merged;
      for (std::size_t i = 0; i + 1 < spans_.size(); i += 2)
        merged.push_back(merge(spans_[i], spans_[i + 1]));
      if (spans_.size() % 2) merged.push_back(spans_.back());
      spans_ = std::move(merged);
      span_rows_ *= 2;
    }
    if (spans_.empty() || spans_.back().last - spans_.back().first + 1 >= span_rows_) {
      spans_.push_back(Span{row.index, row.index, {row}});
      return;
    }
  }
  Span& open = spans_.back();
  open.last = row.index;
  open.extremes.push_back(row);
  open.extremes = extremes_of(open.extremes);
}

void TimelineSampler::add(TimelineRow row) {
  row.index = added_++;
  if (row.index < kHeadRows) head_.push_back(row);
  if (tail_.size() < kTailRows) {
    tail_.push_back(row);
    return;
  }
  // The ring is full: the row it drops goes to the spans, unless the head
  // has it already.
  TimelineRow& slot = tail_[row.index % kTailRows];
  if (slot.index >= kHeadRows) add_to_spans(slot);
  slot = row;
}

void TimelineSampler::pin() {
  if (pinned_.size() >= kMaxPins || added_ == 0) return;
  std::vector<TimelineRow> rows = tail_;
  std::sort(rows.begin(), rows.end(),
            [](const TimelineRow& a, const TimelineRow& b) { return a.index < b.index; });
  pinned_.push_back(std::move(rows));
}

Timeline TimelineSampler::timeline() const {
  std::vector<const TimelineRow*> rows;
  for (const TimelineRow& r : head_) rows.push_back(&r);
  for (const Span& s : spans_)
    for (const TimelineRow& r : s.extremes) rows.push_back(&r);
  for (const auto& pin : pinned_)
    for (const TimelineRow& r : pin) rows.push_back(&r);
  for (const TimelineRow& r : tail_) rows.push_back(&r);
  std::sort(rows.begin(), rows.end(),
            [](const TimelineRow* a, const TimelineRow* b) { return a->index < b->index; });
  rows.erase(
      std::unique(rows.begin(), rows.end(),
                  [](const TimelineRow* a, const TimelineRow* b) { return a->index == b->index; }),
      rows.end());
  Timeline t;
  t.boundaries = added_;
  for (const TimelineRow* r : rows) {
    t.step.push_back(r->step);
    t.time_s.push_back(r->time_s);
    t.live_tensor_bytes.push_back(r->live_tensor_bytes);
    t.live_device_bytes.push_back(r->live_device_bytes);
    t.pool_reserved_bytes.push_back(r->pool_reserved_bytes);
    t.device_used_bytes.push_back(r->device_used_bytes);
    t.host_rss_bytes.push_back(r->host_rss_bytes);
    if (!r->site_live_bytes.empty()) t.site_live_bytes.push_back(r->site_live_bytes);
  }
  return t;
}

}  // namespace gpuleak::analysis
