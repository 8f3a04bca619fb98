// ProcessAnalysis, where steps end: the step boundaries of every clock (the
// program's steps, loops found in the allocations, time windows while
// nothing else marks steps), each phase they open, and what is sampled and
// judged at each boundary.
#include "analysis/process_analysis.h"

namespace gpuleak::analysis {

void ProcessAnalysis::advance_time_windows(std::uint64_t time_ns) {
  // Programs with no other clock get time windows. Empty windows in a long
  // silence are skipped (a damaged time could otherwise ask for billions of
  // them), and the window arithmetic must not wrap around.
  if (real_steps_ || first_time_ns_ == 0) return;
  auto window_ns = static_cast<std::uint64_t>(options_.time_window_s * 1e9);
  if (window_ns == 0 || time_ns < next_window_ns_) return;
  constexpr std::uint64_t kMaxWindowsPerGap = 1000;
  std::uint64_t missed = (time_ns - next_window_ns_) / window_ns;
  if (missed > kMaxWindowsPerGap) next_window_ns_ += (missed - kMaxWindowsPerGap) * window_ns;
  Phase* windows = phase_for({trace::StepSource::kTimeWindow, 0});
  while (time_ns >= next_window_ns_ && next_window_ns_ <= UINT64_MAX - window_ns) {
    if (windows != nullptr) add_boundary(*windows, windows->growth.boundaries(), next_window_ns_);
    next_window_ns_ += window_ns;
  }
  if (next_window_ns_ > UINT64_MAX - window_ns) next_window_ns_ = UINT64_MAX;
}

ProcessAnalysis::Phase* ProcessAnalysis::phase_for(ClockKey clock) {
  std::string label = clock.source == trace::StepSource::kTimeWindow ? std::string() : label_;
  for (auto& phase : phases_) {
    if (phase->clock == clock && phase->label == label) return phase.get();
  }
  if (phases_.size() >= options_.max_phases) return nullptr;
  auto phase = std::make_unique<Phase>(options_.growth);
  phase->label = label;
  phase->clock = clock;
  // A phase that begins late starts from what is live now.
  live_.for_each([&](const LiveAllocation& a) {
    if (tracked_for_growth(a.kind)) phase->growth.on_alloc(a);
  });
  phases_.push_back(std::move(phase));
  return phases_.back().get();
}

void ProcessAnalysis::on_step_boundary(ClockKey clock, std::uint64_t step_number,
                                       std::uint64_t time_ns) {
  if (!arbiter_.on_step_boundary(clock, time_ns)) return;  // a better clock paces the program now
  Phase* phase = phase_for(clock);
  if (phase == nullptr) {
    ++untracked_steps_;
    return;
  }
  real_steps_ = true;  // no more time windows
  add_boundary(*phase, step_number, time_ns);
}

void ProcessAnalysis::add_boundary(Phase& phase, std::uint64_t step_number, std::uint64_t time_ns) {
  ++boundaries_;
  if (phase.growth.boundaries() == 0) phase.first_boundary_ns = time_ns;
  phase.last_boundary_ns = time_ns;
  phase.growth.on_boundary(step_number, time_ns);
  phase.rss_at_boundary.push(static_cast<double>(host_rss_.value_or(0)));
  phase.reserved_at_boundary.push(static_cast<double>(pool_reserved_.value_or(0)));
  if (pool_used_) {
    // The series begins at the first boundary that has a reading; later
    // boundaries without a new one repeat the last.
    if (phase.pool_used_at_boundary.total() == 0) {
      phase.pool_first_boundary = phase.growth.boundaries() - 1;
    }
    phase.pool_used_at_boundary.push(static_cast<double>(*pool_used_));
    if (phase.pool_samples_seen != pool_used_samples_) ++phase.pool_fresh;
    phase.pool_samples_seen = pool_used_samples_;
  }
  TimelineRow row;
  row.step = step_number;
  row.time_s = time_ns > first_time_ns_ ? static_cast<double>(time_ns - first_time_ns_) / 1e9 : 0;
  row.live_tensor_bytes = live_.tensor_bytes();
  row.live_device_bytes = live_.device_bytes();
  auto fresh = [](const std::optional<std::uint64_t>& value, std::uint64_t samples,
                  std::uint64_t& seen) -> std::optional<std::uint64_t> {
    bool taken_since = samples != seen;
    seen = samples;
    return taken_since ? value : std::nullopt;
  };
  // PyTorch's reserve is its cache's segments, which the trace holds: exact
  // at this boundary, so never below the tensors inside them. Otherwise
  // (a cudaMallocAsync pool, CuPy) the pool's sample, when one is new.
  std::optional<std::uint64_t> reserved_sample =
      fresh(pool_reserved_, pool_reserved_samples_, phase.reserved_samples_seen);
  row.pool_reserved_bytes =
      pool_blocks_seen_ && activity_.cache_bytes() > 0 ? activity_.cache_bytes() : reserved_sample;
  row.device_used_bytes = fresh(device_used_, device_used_samples_, phase.device_used_samples_seen);
  row.host_rss_bytes = fresh(host_rss_, host_rss_samples_, phase.rss_samples_seen);
  if (export_) row.site_live_bytes = export_->series_values();
  phase.timeline.add(row);
  std::uint64_t n = phase.growth.boundaries();
  // The statistics are O(window^2): evaluate every boundary early on (a
  // verdict should come as soon as it is justified), then every fifth.
  if (n <= 300 || n % 5 == 0) evaluate(phase);
}

void ProcessAnalysis::evaluate(Phase& phase) {
  for (const SiteTrend& trend : phase.growth.growing_sites()) {
    if (!is_tensor_kind(trend.kind) && is_pool_segment(trend.site_id)) {
      continue;  // a segment of PyTorch's or CuPy's cache: reserved memory, not a leak of its own
    }
    if (phase.detected_at.emplace(trend.site_id, phase.growth.boundaries() - 1).second) {
      phase.detection_order.push_back(trend.site_id);
      phase.timeline.pin();  // the start of the growth stays in the timeline in full
    }
    phase.latest_trend[trend.site_id] = trend;
  }
  if (!hidden_allocations_reason_.empty() && phase.pool_used_at_boundary.total() > 0) {
    phase.pool_trend = phase.growth.series_trend(phase.pool_used_at_boundary);
    if (phase.pool_trend && !phase.pool_detected_at) {
      phase.pool_detected_at = phase.growth.boundaries() - 1;
      phase.timeline.pin();
    }
  }
}

bool ProcessAnalysis::pool_judged(const Phase& phase) const {
  if (hidden_allocations_reason_.empty()) return false;
  // Read at a quarter of the boundaries or more (the package reads at most
  // once per ms, and a jitted step takes about 0.5 ms: every second one),
  // and at enough of them for a verdict: a reading every 500 ms of a loop
  // that ran 0.1 s says nothing.
  const GrowthOptions& o = options_.growth;
  std::uint64_t total = phase.pool_used_at_boundary.total();
  return total >= o.warmup_steps + o.min_steps && 4 * phase.pool_fresh >= total;
}

}  // namespace gpuleak::analysis
