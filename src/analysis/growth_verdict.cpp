// ProcessAnalysis, the growth verdict: each phase's report (the sites found
// growing, the verdict, its cause, rates and time to a full device), and
// the choice of the phase the report is about.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "analysis/growth/growth_notes.h"
#include "analysis/growth/leak_cause.h"
#include "analysis/process_analysis.h"
#include "gpuleak/vocabulary.h"
#include "quantity/units.h"

namespace gpuleak::analysis {

using trace::MemoryKind;
using vocabulary::Cause;
using vocabulary::cause_slug;

SiteGrowth ProcessAnalysis::describe_site(const SiteTrend& trend) {
  SiteGrowth s;
  s.site_id = trend.site_id;
  s.rate_bytes_per_step = trend.bytes_per_step;
  s.allocations_per_step = trend.allocations_per_step;
  s.live_bytes = trend.live_bytes;
  s.live_allocations = trend.live_allocations;
  s.first_growing_step = trend.first_growing_step;
  s.kind = trend.kind;
  // JAX with its platform allocator: what it takes from the driver (one
  // allocation per buffer, or granules of virtual memory it maps its
  // buffers into) holds its arrays and nothing else.
  bool framework_memory = trend.kind == MemoryKind::kDevice ||
                          trend.kind == MemoryKind::kDeviceAsync ||
                          trend.kind == MemoryKind::kVmmPhysical;
  s.tensor_level = is_tensor_kind(trend.kind) || (device_memory_holds_arrays_ && framework_memory);
  if (!s.tensor_level) s.origin = catalog_.origin(trend.site_id);
  if (const HolderFinding* h = find_holder(trend.site_id)) s.bounded = h->bounded;
  s.frames = catalog_.frames(trend.site_id);
  s.site = choose_site(s.frames);
  return s;
}

SiteGrowth ProcessAnalysis::pool_site(const Phase& phase) const {
  // Not an allocation site: the pool's bytes in use, judged per iteration
  // of the phase's loop. The site shown is that loop, the nearest place the
  // package knows (arrays inside the pool have no stacks).
  const SiteTrend& trend = *phase.pool_trend;
  SiteGrowth s;
  s.site_id = kPoolSiteId;
  s.rate_bytes_per_step = trend.bytes_per_step;
  s.live_bytes = trend.live_bytes;
  s.kind = MemoryKind::kTorchBlock;
  s.tensor_level = true;
  s.origin = "arrays inside the framework's pool (its bytes in use)";
  std::uint64_t first = phase.pool_first_boundary + phase.growth.options().warmup_steps;
  if (first < phase.growth.boundaries()) s.first_growing_step = phase.growth.step_number_at(first);
  auto site = clock_sites_.find(phase.clock);
  if (site != clock_sites_.end()) s.site = site->second;
  // The package's walk for the arrays that filled the pool (jax_arrays.py).
  if (const HolderFinding* h = find_holder(kPoolSiteId)) s.bounded = h->bounded;
  return s;
}

GrowthReport ProcessAnalysis::phase_report(const Phase& phase) {
  GrowthReport g;
  const GrowthTracker& growth = phase.growth;
  g.steps = growth.boundaries();
  g.step_source = trace::step_source_name(phase.clock.source);
  g.phase = phase_name(phase);
  g.step_source_reason = phase_reason(phase);
  g.warmup_steps = growth.options().warmup_steps;

  std::vector<SiteGrowth> leaking, bounded;
  bool stopped_only = true;  // every bounded site is one that stopped growing
  for (std::uint32_t site : phase.detection_order) {
    SiteGrowth s = describe_site(phase.latest_trend.at(site));
    if (auto stop = growth.stopped_growing(site)) {
      s.grew_until_step = stop->grew_until_step;
      s.flat_steps = stop->flat_steps;
      s.first_growing_step = stop->first_growing_step;
      s.live_bytes = stop->bytes;
      s.bounded = true;
    } else if (growth.wanders_now(site)) {
      s.bounded = true;  // a full cache whose entries' sizes vary
      stopped_only = false;
    } else if (s.bounded) {
      stopped_only = false;
    }
    (s.bounded ? bounded : leaking).push_back(std::move(s));
  }
  bool judged_by_pool = pool_judged(phase);
  if (judged_by_pool && phase.pool_trend) leaking.push_back(pool_site(phase));
  std::sort(leaking.begin(), leaking.end(), [](const auto& a, const auto& b) {
    return a.rate_bytes_per_step > b.rate_bytes_per_step;
  });

  if (!leaking.empty()) {
    g.verdict = Verdict::kLeak;
  } else if (growth.past_minimum()) {
    g.verdict = Verdict::kNoLeak;
  }
  if (growth.past_minimum()) {
    const GrowthOptions& o = growth.options();
    std::uint64_t judged = g.steps > o.warmup_steps ? g.steps - o.warmup_steps : 0;
    judged = std::clamp(judged, o.min_steps, std::max(o.min_steps, o.window_steps));
    g.detection_floor_bytes_per_step =
        static_cast<double>(o.min_growth_bytes) / static_cast<double>(judged);
  }

  // Iteration duration in the recent window, for rates in time.
  double seconds_per_step = growth.seconds_per_step();

  if (auto rss = growth.series_trend(phase.rss_at_boundary))
    g.host_rss_bytes_per_step = rss->bytes_per_step;
  if (auto reserved = growth.series_trend(phase.reserved_at_boundary)) {
    g.pool_reserved_bytes_per_step = reserved->bytes_per_step;
  }
  if (device_total_) g.device_total_bytes = *device_total_;

  bool gpu = false, host = g.host_rss_bytes_per_step > 0;
  for (const SiteGrowth& s : leaking) {
    g.rate_bytes_per_step += s.rate_bytes_per_step;
    if (s.kind == MemoryKind::kHostPinned)
      host = true;
    else
      gpu = true;
  }
  g.where = gpu && host ? Where::kBoth : gpu ? Where::kGpu : host ? Where::kHost : Where::kNone;

  if (g.verdict == Verdict::kLeak) {
    std::uint64_t first_detection = UINT64_MAX;
    std::uint64_t first_growing = UINT64_MAX;
    for (const SiteGrowth& s : leaking) {
      first_detection = std::min(first_detection, s.site_id == kPoolSiteId
                                                      ? phase.pool_detected_at.value_or(UINT64_MAX)
                                                      : phase.detected_at.at(s.site_id));
      first_growing = std::min(first_growing, s.first_growing_step);
    }
    if (first_detection < growth.boundaries()) {
      g.verdict_step = growth.step_number_at(first_detection);
    }
    g.first_growing_step = first_growing;
    if (auto dated = date_from_summary(phase, first_growing, g.rate_bytes_per_step)) {
      g.first_growing_step = *dated;
      for (SiteGrowth& s : leaking) {
        if (auto site = date_from_summary(phase, s.first_growing_step, s.rate_bytes_per_step))
          s.first_growing_step = *site;
      }
    }
    if (seconds_per_step > 0) g.rate_bytes_per_second = g.rate_bytes_per_step / seconds_per_step;
    if (device_total_ && g.rate_bytes_per_second > 0) {
      std::uint64_t used = device_used_.value_or(live_.device_bytes());
      double room = used < *device_total_ ? static_cast<double>(*device_total_ - used) : 0;
      g.seconds_to_full = room / g.rate_bytes_per_second;
    }

    const HolderFinding* top_holder = find_holder(leaking.front().site_id);
    LeakCause cause = leak_cause(leaking, top_holder, runs_python());
    g.cause = std::move(cause.cause);
    g.cause_text = std::move(cause.text);
    g.fix = std::move(cause.fix);
    if (top_holder) report_holder(*top_holder, g);
  } else if (!bounded.empty()) {
    g.cause = cause_slug(Cause::kBoundedGrowth);
    g.cause_text =
        stopped_only
            ? stopped_growth_text(bounded.front())
            : "memory grew only inside a bounded container; it stops growing at the container's "
              "limit";
    if (const HolderFinding* h = find_holder(bounded.front().site_id)) report_holder(*h, g);
  }
  if (g.verdict != Verdict::kLeak && g.pool_reserved_bytes_per_step > 0) {
    g.note =
        "reserved memory grows while live tensors do not: the allocator is caching or fragmenting, "
        "not leaking (torch.cuda.empty_cache() would hide this, not fix anything)";
  }
  g.pool_judged = judged_by_pool;
  if (judged_by_pool && g.note.empty()) {
    g.note =
        "judged by the pool's bytes in use at each iteration: the arrays inside it are not seen "
        "one by one, so no line that made them is named";
  }
  if (g.verdict == Verdict::kNotYet) {
    for (const SiteTrend& trend : growth.rising_sites()) {
      // As in evaluate(): a segment of PyTorch's or CuPy's cache is not a
      // leak of its own.
      if (!is_tensor_kind(trend.kind) && is_pool_segment(trend.site_id)) continue;
      g.rising_sites.push_back(describe_site(trend));
    }
    // What the rise would be if it goes on (the report says "if it keeps
    // rising"): the creating API and its destroy call for a library handle.
    if (!g.rising_sites.empty() && g.cause.empty()) {
      LeakCause cause = leak_cause(g.rising_sites, nullptr, runs_python());
      g.cause = std::move(cause.cause);
      g.cause_text = std::move(cause.text);
      g.fix = std::move(cause.fix);
    }
  }
  describe_lost_events(growth, g);
  g.sites = std::move(leaking);
  for (auto& s : bounded) g.sites.push_back(std::move(s));
  return g;
}

std::vector<const trace::StepSummaryRecord*> ProcessAnalysis::summarized_marks(
    const Phase& phase) const {
  std::vector<const trace::StepSummaryRecord*> marks;
  for (const auto& step : summarized_steps_) {
    if (step.source == phase.clock.source && step.clock == phase.clock.clock &&
        (marks.empty() || step.step > marks.back()->step))
      marks.push_back(&step);
  }
  return marks;
}

std::optional<std::uint64_t> ProcessAnalysis::date_from_summary(const Phase& phase,
                                                                std::uint64_t first_growing_step,
                                                                double rate_bytes_per_step) const {
  if (!compaction_ || rate_bytes_per_step <= 0 || phase.growth.boundaries() == 0) return {};
  // Growth that began inside the raw part is dated there already; growth
  // under way at its first steps (the warm-up the raw part judges again
  // included) may be older.
  std::uint64_t raw_first_step = phase.growth.step_number_at(0);
  if (first_growing_step > raw_first_step + phase.growth.options().warmup_steps + 1) return {};
  std::vector<const trace::StepSummaryRecord*> points = summarized_marks(phase);
  std::erase_if(points, [&](const auto* step) { return step->step >= raw_first_step; });
  if (points.empty()) return {};
  // What was live at each kept step is every kind of memory together: a
  // stretch grew with this leak when it rose by at least half of what the
  // leak's rate gives over it. Stretches of at least kStretchSteps steps,
  // then step by step inside the last one that grew: a leak of one block
  // every 50th step rises over a stretch, not at every step.
  constexpr std::uint64_t kStretchSteps = 64;
  auto grew = [&](const trace::StepSummaryRecord* from, const trace::StepSummaryRecord* to) {
    double rise = static_cast<double>(to->live_bytes) - static_cast<double>(from->live_bytes);
    return rise >= 0.5 * rate_bytes_per_step * static_cast<double>(to->step - from->step);
  };
  std::size_t begin = points.size() - 1;  // growing from points[begin] on
  while (begin > 0) {
    std::size_t from = begin;
    while (from > 0 && points[begin]->step - points[from]->step < kStretchSteps) --from;
    if (!grew(points[from], points[begin])) {
      // Inside this stretch: back step by step while each step grew.
      while (begin > from && grew(points[begin - 1], points[begin])) --begin;
      break;
    }
    begin = from;
  }
  // A stretch that grew may begin flat (the leak began inside it).
  while (begin + 1 < points.size() && !grew(points[begin], points[begin + 1])) ++begin;
  if (begin + 1 == points.size()) return {};  // flat up to the raw part: growth began there
  return points[begin]->step;
}

GrowthReport ProcessAnalysis::growth_report() { return growth_report_of_phases(nullptr); }

GrowthReport ProcessAnalysis::growth_report_of_phases(const Phase** primary_phase) {
  std::vector<GrowthReport> reports;
  std::vector<const Phase*> order;
  for (const auto& phase : phases_) {
    reports.push_back(phase_report(*phase));
    order.push_back(phase.get());
  }
  // A loop found in library code (the per-parameter loop inside
  // torch.optim's step) is a piece of a step the program's own clock already
  // counts: when such a clock reached a verdict, the library loop's
  // iterations are not the program's (on the H200 a loop of one allocation in
  // Adam's _multi_tensor_adam was judged LEAK while 500 optimizer steps said
  // NO LEAK).
  bool trusted_verdict = false;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    trace::StepSource source = order[i]->clock.source;
    if ((source == trace::StepSource::kExplicit || source == trace::StepSource::kOptimizerHook ||
         source == trace::StepSource::kDataLoader) &&
        reports[i].verdict != Verdict::kNotYet)
      trusted_verdict = true;
  }
  // A loop found in library code that was over before a loop of the
  // program's own began is set-up, not the program's steps: NCCL's
  // communicator set-up inside init_process_group allocates three 2 MiB
  // buffers a round, 64 rounds in 13 ms, and keeps them for the run (on the
  // H100 it was judged LEAK +6 MiB/iteration while the script's loop, which
  // began after it, never grew).
  auto over_before_the_programs_loop = [&](const Phase& loop) {
    return std::any_of(order.begin(), order.end(), [&](const Phase* other) {
      return other != &loop && other->clock.source != trace::StepSource::kAllocationPeriod &&
             !is_time_windows(*other) && other->growth.boundaries() > 0 &&
             other->first_boundary_ns > loop.last_boundary_ns;
    });
  };
  // Both kinds of library loop, decided once per phase (rank below compares
  // phases many times).
  std::vector<bool> library_loops(order.size(), false);
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i]->clock.source != trace::StepSource::kAllocationPeriod) continue;
    auto frame = finder_.loop_frame(order[i]->clock.clock, catalog_);
    if (!frame || !frame->internal) continue;
    library_loops[i] = trusted_verdict || over_before_the_programs_loop(*order[i]);
  }
  // A loop the finder followed first and then found inside another (a
  // batch's per-request loop, before the serving loop around it showed):
  // its iterations are pieces of the other's, and what "grew" between them
  // is the other iteration's work in flight.
  auto inner_loop = [&](std::size_t i) {
    if (order[i]->clock.source != trace::StepSource::kAllocationPeriod) return false;
    const FoundLoop* loop = finder_.loop(order[i]->clock.clock);
    return loop != nullptr && loop->retired;
  };
  // A Python loop followed first and then found inside the loop that took
  // over from it (the per-request loop of a serving loop's batch): its
  // iterations are pieces of the outer one's. Unlike the finder's retired
  // loops it keeps a verdict of its own: it may be the only one so far (an
  // epoch loop that took over from its batches after 8 epochs).
  auto enclosed = [&](std::size_t i) { return enclosed_clocks_.contains(order[i]->clock); };
  // The phase the report is about: a leaking one (the fastest), else one
  // that reached a verdict, else the one with the most iterations; time
  // windows (and library loops, above) only when nothing else ticked; an
  // enclosed loop only over a phase with a weaker verdict.
  auto rank = [&](std::size_t i) {
    const GrowthReport& r = reports[i];
    int verdict = r.verdict == Verdict::kLeak ? 2 : r.verdict == Verdict::kNoLeak ? 1 : 0;
    bool windows = is_time_windows(*order[i]) || library_loops[i] || inner_loop(i);
    // Between phases with the same verdict, the program's own word first.
    int trust = -trust_rank(order[i]->clock.source);
    return std::make_tuple(!windows, verdict, !enclosed(i),
                           verdict == 2 ? r.rate_bytes_per_step : 0.0, trust, r.steps);
  };
  std::optional<std::size_t> primary;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (!primary || rank(i) > rank(*primary)) primary = i;
  }
  GrowthReport g;
  if (primary_phase != nullptr) *primary_phase = primary ? order[*primary] : nullptr;
  if (primary) {
    g = reports[*primary];
  } else {
    g.step_source = trace::step_source_name(trace::StepSource::kTimeWindow);
    g.warmup_steps = options_.growth.warmup_steps;
  }
  bool other_than_windows =
      std::any_of(order.begin(), order.end(), [&](const Phase* p) { return !is_time_windows(*p); });
  for (std::size_t i = 0; i < reports.size(); ++i) {
    // Time windows before the first iteration (start-up) say nothing once
    // the program's iterations are known, nor do phases that never got past
    // their warm-up (a loop that went round a few times during set-up).
    if (other_than_windows && is_time_windows(*order[i])) continue;
    if (reports[i].steps <= options_.growth.warmup_steps && !(primary && i == *primary)) continue;
    if ((library_loops[i] || inner_loop(i) || enclosed(i)) && !(primary && i == *primary)) continue;
    PhaseSummary p;
    p.name = reports[i].phase;
    p.label = order[i]->label;
    p.step_source = reports[i].step_source;
    p.steps = reports[i].steps;
    p.verdict = reports[i].verdict;
    p.rate_bytes_per_step = reports[i].rate_bytes_per_step;
    p.verdict_step = reports[i].verdict_step;
    p.primary = primary && i == *primary;
    g.phases.push_back(std::move(p));
  }
  // A framework that hands out arrays from a pool it reserved at start (JAX
  // preallocates) hides them from the driver: no visible growth says
  // nothing about them, so the run is not called clean.
  // Unless the primary phase was judged by the pool's bytes in use.
  bool judged_by_pool = primary && pool_judged(*order[*primary]);
  if (g.verdict == Verdict::kNoLeak && !hidden_allocations_reason_.empty() && !judged_by_pool) {
    g.verdict = Verdict::kNotYet;
    g.undecided_reason = hidden_allocations_reason_;
  } else {
    if (g.verdict == Verdict::kNotYet && primary) judge_from_step_summary(*order[*primary], g);
    if (g.verdict != Verdict::kNotYet) g.rising_sites.clear();
    g.undecided_reason = undecided_reason(g);
  }
  if (g.verdict == Verdict::kNotYet) {
    std::string loop = python_loop_note();
    if (!loop.empty()) {
      g.undecided_reason += (g.undecided_reason.empty() ? "" : "; ") + loop;
    }
  }
  return g;
}

// The writer compacts when its file passes half the bound, which may be just
// before the program ends (the backlog written at exit): the raw part after
// the summary then holds too few steps for the growth tracker, while the
// summary kept what was live at every step_resolution-th step of the whole
// run. A run whose live memory made no new high in the second half of those
// marks, and is no higher at its end, did not leak over them; one that did
// stays NOT YET with the figures (the summary has no sites to name, so it
// never says LEAK by itself).
void ProcessAnalysis::judge_from_step_summary(const Phase& phase, GrowthReport& growth) const {
  const GrowthOptions& o = options_.growth;
  if (!compaction_ || events_missing_ || growth.steps >= o.warmup_steps + o.min_steps) return;
  std::vector<const trace::StepSummaryRecord*> marks = summarized_marks(phase);
  std::erase_if(marks, [&](const auto* mark) { return mark->step <= o.warmup_steps; });
  if (marks.size() < 4 || marks.back()->step - marks.front()->step < o.min_steps) return;
  auto high = [](auto begin, auto end) {
    std::uint64_t most = 0;
    for (auto it = begin; it != end; ++it) most = std::max(most, (*it)->live_bytes);
    return most;
  };
  auto middle = marks.begin() + static_cast<std::ptrdiff_t>(marks.size() / 2);
  std::uint64_t first_high = high(marks.begin(), middle);
  std::uint64_t second_high = high(middle, marks.end());
  std::uint64_t live_at_end = std::max(live_.device_bytes(), live_.tensor_bytes());
  std::string span = fmt::format(
      "the trace was compacted {} steps before the end; the summary's {} step marks "
      "(one every {} steps, steps {} to {})",
      growth.steps, marks.size(), compaction_->step_resolution, marks.front()->step,
      marks.back()->step);
  if (second_high <= first_high && live_at_end <= first_high) {
    growth.verdict = Verdict::kNoLeak;
    growth.note += (growth.note.empty() ? "" : "; ") + span +
                   fmt::format(" show no new high of live memory after the first half ({})",
                               quantity::format_bytes(first_high));
    return;
  }
  growth.note += (growth.note.empty() ? "" : "; ") + span +
                 fmt::format(" show live memory rising from a high of {} to {}",
                             quantity::format_bytes(first_high),
                             quantity::format_bytes(std::max(second_high, live_at_end)));
}

}  // namespace gpuleak::analysis
