#include "analysis/process_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "analysis/annotation_fields.h"
#include "analysis/growth_notes.h"
#include "gpuleak/vocabulary.h"

namespace gpuleak::analysis {

using trace::MemoryKind;
using vocabulary::Cause;
using vocabulary::cause_slug;

namespace {

constexpr const char* kCachingAllocator = "PyTorch caching allocator";
constexpr const char* kCupyPool = "CuPy memory pool";

// Why no verdict may call the run clean when a framework hands out its arrays
// from a pool it reserved at start (JAX preallocates): nothing visible grows,
// which says nothing about the arrays inside. "" when the framework_tracking
// annotation says nothing is hidden.
std::string hidden_allocations_reason(const std::string& framework_tracking) {
  auto framework = nlohmann::json::parse(framework_tracking, nullptr, false);
  if (!framework.is_object() || !flag_field(framework, "hidden_allocations")) return "";
  std::string name = text_field(framework, "framework");
  std::string how = text_field(framework, "how_to_see");
  return fmt::format(
      "{} allocates its arrays from a pool it reserved at start, which the driver sees as one "
      "block: nothing visible grows, but that says nothing about the arrays inside it{}",
      name.empty() ? std::string("the framework") : name,
      how.empty() ? std::string() : "; run with " + how + " to see each array");
}

bool tracked_for_growth(MemoryKind kind) {
  // Address space and mappings hold no memory of their own.
  return kind != MemoryKind::kAddressRange && kind != MemoryKind::kVmmMapping;
}

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

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kLeak:
      return "LEAK";
    case Verdict::kNoLeak:
      return "NO LEAK";
    case Verdict::kNotYet:
      return "NOT YET";
  }
  return "NOT YET";
}

const char* where_name(Where where) {
  switch (where) {
    case Where::kNone:
      return "none";
    case Where::kGpu:
      return "gpu";
    case Where::kHost:
      return "host";
    case Where::kBoth:
      return "both";
  }
  return "none";
}

ProcessAnalysis::ProcessAnalysis(AnalysisOptions options)
    : options_(std::move(options)), finder_(options_.iterations) {
  catalog_.set_source_lookup(options_.source_lookup);
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
    std::visit(
        [this](const auto& r) {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, trace::ProcessRecord>) {
            process_ = r;
            first_time_ns_ = r.start_monotonic_ns;
            next_window_ns_ =
                first_time_ns_ + static_cast<std::uint64_t>(options_.time_window_s * 1e9);
          } else if constexpr (std::is_same_v<T, trace::StackRecord> ||
                               std::is_same_v<T, trace::PythonCodeRecord> ||
                               std::is_same_v<T, trace::ModuleRecord> ||
                               std::is_same_v<T, trace::SymbolRecord> ||
                               std::is_same_v<T, trace::SourceLineRecord> ||
                               std::is_same_v<T, trace::ApiNameRecord> ||
                               std::is_same_v<T, trace::ThreadRecord>) {
            catalog_.add(r);
          }
        },
        record);
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
      on_tick({trace::StepSource::kAllocationPeriod, item.loop_id}, item.iteration, item.time_ns);
    } else {
      apply(item.record);
    }
  }
}

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

void ProcessAnalysis::apply(const trace::Record& record) {
  std::uint64_t time_ns = std::visit(
      [](const auto& r) -> std::uint64_t {
        if constexpr (requires { r.time_ns; }) return r.time_ns;
        return 0;
      },
      record);
  if (time_ns > last_time_ns_) last_time_ns_ = time_ns;
  std::uint64_t seq = 0;
  if (trace::record_seq(record, &seq)) {
    // Sequence numbers are dense (the collector fills one that has no event
    // with an empty LostRecord): a jump is events dropped, or a damaged
    // trace; the iteration they fell in is judged without its changes.
    if (seq > next_seq_) {
      events_missing_ = true;
      for (auto& phase : phases_) phase->growth.on_lost(seq - next_seq_);
    }
    if (seq >= next_seq_) next_seq_ = seq + 1;
  }
  if (!std::holds_alternative<trace::StepRecord>(record)) advance_time_windows(time_ns);

  std::visit(
      [this](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, trace::AllocRecord>) {
          ++allocations_;
          if (r.kind == MemoryKind::kTorchBlock) pool_blocks_seen_ = true;
          LiveAllocation stale;
          if (live_.add(r, boundaries_, &stale)) {
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
          peak_live_bytes_ =
              std::max(peak_live_bytes_, live_.device_bytes() + live_.tensor_bytes());
        } else if constexpr (std::is_same_v<T, trace::FreeRecord>) {
          if (r.address == 0) return;
          ++frees_;
          auto removed = live_.remove(r);
          if (removed) activity_.on_free(*removed, r.time_ns);
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
          on_tick({r.source, r.clock}, r.step, r.time_ns);
        } else if constexpr (std::is_same_v<T, trace::SampleRecord>) {
          switch (r.metric) {
            case trace::Metric::kHostRssBytes:
              host_rss_ = r.value;
              break;
            case trace::Metric::kDeviceUsedBytes:
              device_used_ = r.value;
              break;
            case trace::Metric::kDeviceTotalBytes:
              device_total_ = r.value;
              break;
            case trace::Metric::kPoolReservedBytes:
            case trace::Metric::kTorchReservedBytes:
              pool_reserved_ = r.value;
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
  return origin == kCachingAllocator || (origin == kCupyPool && pool_blocks_seen_);
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

void ProcessAnalysis::on_tick(ClockKey clock, std::uint64_t step_number, std::uint64_t time_ns) {
  if (!arbiter_.on_tick(clock, time_ns)) return;  // a better clock paces the program now
  Phase* phase = phase_for(clock);
  if (phase == nullptr) {
    ++untracked_ticks_;
    return;
  }
  real_steps_ = true;  // no more time windows
  add_boundary(*phase, step_number, time_ns);
}

void ProcessAnalysis::add_boundary(Phase& phase, std::uint64_t step_number, std::uint64_t time_ns) {
  ++boundaries_;
  phase.growth.on_boundary(step_number, time_ns);
  phase.rss_at_boundary.push(static_cast<double>(host_rss_.value_or(0)));
  phase.reserved_at_boundary.push(static_cast<double>(pool_reserved_.value_or(0)));
  TimelineRow row;
  row.step = step_number;
  row.time_s = time_ns > first_time_ns_ ? static_cast<double>(time_ns - first_time_ns_) / 1e9 : 0;
  row.live_tensor_bytes = live_.tensor_bytes();
  row.live_device_bytes = live_.device_bytes();
  row.pool_reserved_bytes = pool_reserved_;
  row.device_used_bytes = device_used_;
  row.host_rss_bytes = host_rss_;
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
}

void ProcessAnalysis::on_annotation(const trace::AnnotationRecord& record) {
  if (record.key == "torch_tracking") {
    torch_tracking_ = record.value;
    return;
  }
  if (record.key == "clock") {
    clock_ = record.value;
    return;
  }
  if (record.key == "distributed") {
    distributed_ = record.value;
    return;
  }
  if (record.key == "phase") {
    // {"name": "eval", "event": "begin" | "end"} from gpuleak.phase().
    nlohmann::json phase = nlohmann::json::parse(record.value, nullptr, false);
    if (!phase.is_object()) return;
    std::string event = text_field(phase, "event");
    if (event == "begin") label_ = text_field(phase, "name").substr(0, 200);
    if (event == "end") label_.clear();
    return;
  }
  if (record.key == "iteration_clock") {
    // {"source": 4, "clock": 1, "description": "batches of ..."}: what a
    // numbered clock of a source is.
    nlohmann::json clock = nlohmann::json::parse(record.value, nullptr, false);
    if (!clock.is_object()) return;
    auto source = clock.find("source");
    auto id = clock.find("clock");
    if (source == clock.end() || !source->is_number_unsigned() || id == clock.end() ||
        !id->is_number_unsigned() || source->get<std::uint64_t>() > 0xff ||
        id->get<std::uint64_t>() > UINT32_MAX)
      return;
    if (clock_descriptions_.size() >= 1000) return;
    ClockKey key{static_cast<trace::StepSource>(source->get<std::uint64_t>()),
                 static_cast<std::uint32_t>(id->get<std::uint64_t>())};
    clock_descriptions_[key] = text_field(clock, "description").substr(0, 200);
    return;
  }
  if (record.key == "capture_backend") {
    capture_backend_ = record.value;
    return;
  }
  if (record.key == "framework_tracking") {
    framework_tracking_ = record.value;
    hidden_allocations_reason_ = hidden_allocations_reason(record.value);
    auto framework = nlohmann::json::parse(record.value, nullptr, false);
    device_memory_holds_arrays_ =
        framework.is_object() && flag_field(framework, "device_memory_holds_arrays");
    return;
  }
  if (record.key == "collector_disabled") {
    nlohmann::json value = nlohmann::json::parse(record.value, nullptr, false);
    collector_disabled_ = value.is_object() ? text_field(value, "reason") : record.value;
    if (collector_disabled_.empty()) collector_disabled_ = "unknown reason";
    return;
  }
  if (record.key != "holder") return;
  nlohmann::json answer = nlohmann::json::parse(record.value, nullptr, false);
  if (answer.is_discarded() || !answer.contains("sites") || !answer["sites"].is_array()) return;
  for (const auto& site : answer["sites"]) {
    if (!site.is_object()) continue;
    auto id = site.find("site_id");
    if (id == site.end() || !id->is_number_unsigned() || id->get<std::uint64_t>() > UINT32_MAX)
      continue;
    HolderFinding finding;
    finding.json = site.dump();
    finding.kind = text_field(site, "kind");
    if (finding.kind.empty()) finding.kind = "unknown";
    finding.fix = text_field(site, "fix");
    auto holder = site.find("holder");
    if (holder != site.end() && holder->is_object()) {
      finding.bounded = flag_field(*holder, "bounded");
      std::string type = text_field(*holder, "type");
      std::string name = text_field(*holder, "name");
      std::string owner = text_field(*holder, "owner");
      finding.description = type + (name.empty() ? "" : " `" + name + "`") +
                            (owner.empty() ? "" : " (" + owner + ")");
    }
    // A later answer for the same site replaces an earlier one, unless it
    // found nothing where the earlier one named a holder.
    auto [it, inserted] =
        holders_.try_emplace(static_cast<std::uint32_t>(id->get<std::uint64_t>()), finding);
    if (!inserted && !(finding.description.empty() && !it->second.description.empty())) {
      it->second = std::move(finding);
    }
  }
}

std::optional<HolderFinding> ProcessAnalysis::holder(std::uint32_t site_id) const {
  auto it = holders_.find(site_id);
  if (it == holders_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::uint32_t> ProcessAnalysis::detected_sites() const {
  std::vector<std::uint32_t> out;
  for (const auto& phase : phases_) {
    for (std::uint32_t site : phase->detection_order) {
      auto h = holders_.find(site);
      if (h != holders_.end() && h->second.bounded) continue;
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
  for (const auto& a : matching) out.emplace_back(a.address, a.size);
  return out;
}

SiteGrowth ProcessAnalysis::describe_site(const Phase& /*phase*/, const SiteTrend& trend) {
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
  if (auto h = holder(trend.site_id)) s.bounded = h->bounded;
  s.frames = catalog_.frames(trend.site_id);
  s.site = choose_site(s.frames);
  return s;
}

std::string ProcessAnalysis::phase_name(const Phase& phase) {
  std::string name;
  auto described = clock_descriptions_.find(phase.clock);
  switch (phase.clock.source) {
    case trace::StepSource::kExplicit:
      name = "gpuleak.step() calls";
      break;
    case trace::StepSource::kOptimizerHook:
      name = "optimizer steps";
      break;
    case trace::StepSource::kDataLoader:
      name = described != clock_descriptions_.end() && !described->second.empty()
                 ? described->second
                 : "batches of a DataLoader";
      break;
    case trace::StepSource::kAllocationPeriod: {
      name = "iterations of a loop";
      if (auto frame = finder_.loop_frame(phase.clock.clock, catalog_)) {
        // A C++ function's name without its parameter list.
        std::string function = frame->function.substr(0, frame->function.find('('));
        name = "iterations of the loop in " + (function.empty() ? "?" : function);
        if (!frame->file.empty()) {
          std::string file = frame->file.substr(frame->file.find_last_of('/') + 1);
          name += " (" + file + (frame->line ? ":" + std::to_string(frame->line) : "") + ")";
        }
      }
      break;
    }
    case trace::StepSource::kTimeWindow:
      name = fmt::format("{:g}-second time windows", options_.time_window_s);
      break;
    default:
      name = "steps of an unknown source";
  }
  return phase.label.empty() ? name : phase.label + ": " + name;
}

std::string ProcessAnalysis::phase_reason(const Phase& phase) {
  switch (phase.clock.source) {
    case trace::StepSource::kExplicit:
      return "the program marks its iterations with gpuleak.step()";
    case trace::StepSource::kOptimizerHook:
      return "one step per optimizer.step() (torch.optim's step hooks; with several "
             "optimizers, the first that steps)";
    case trace::StepSource::kDataLoader:
      return "one step per batch the DataLoader hands out, where no optimizer steps";
    case trace::StepSource::kAllocationPeriod: {
      const FoundLoop* loop = finder_.loop(phase.clock.clock);
      if (loop == nullptr) return "a loop found in the allocations";
      return fmt::format(
          "the program marks no steps here, and its allocations repeat: the same places "
          "every ~{:.0f} allocations ({:.0f} % alike from one time round to the next)",
          loop->mean_piece_events, 100 * loop->similarity);
    }
    case trace::StepSource::kTimeWindow:
      return "the program marks no steps and no loop was found in its allocations";
    default:
      return "";
  }
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
    SiteGrowth s = describe_site(phase, phase.latest_trend.at(site));
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
  std::sort(leaking.begin(), leaking.end(), [](const auto& a, const auto& b) {
    return a.rate_bytes_per_step > b.rate_bytes_per_step;
  });

  if (!leaking.empty()) {
    g.verdict = Verdict::kLeak;
  } else if (growth.past_minimum()) {
    g.verdict = Verdict::kNoLeak;
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
      first_detection = std::min(first_detection, phase.detected_at.at(s.site_id));
      first_growing = std::min(first_growing, s.first_growing_step);
    }
    if (first_detection < growth.boundaries()) {
      g.verdict_step = growth.step_number_at(first_detection);
    }
    g.first_growing_step = first_growing;
    if (seconds_per_step > 0) g.rate_bytes_per_second = g.rate_bytes_per_step / seconds_per_step;
    if (device_total_ && g.rate_bytes_per_second > 0) {
      std::uint64_t used = device_used_.value_or(live_.device_bytes());
      double room = used < *device_total_ ? static_cast<double>(*device_total_ - used) : 0;
      g.seconds_to_full = room / g.rate_bytes_per_second;
    }

    const SiteGrowth& top = leaking.front();
    auto top_holder = holder(top.site_id);
    std::size_t tensor_sites = std::count_if(leaking.begin(), leaking.end(),
                                             [](const SiteGrowth& s) { return s.tensor_level; });
    bool many_together = false;
    if (tensor_sites >= 3) {
      double low = 1e300, high = 0;
      for (const SiteGrowth& s : leaking) {
        if (!s.tensor_level) continue;
        low = std::min(low, s.allocations_per_step);
        high = std::max(high, s.allocations_per_step);
      }
      many_together = low >= 0.5 && high <= 3 * low;
    }
    if (top_holder && top_holder->kind == "graph") {
      g.cause = cause_slug(Cause::kAutogradGraphKeptAlive);
    } else if (top_holder && top_holder->kind == "tensor") {
      g.cause = cause_slug(Cause::kTensorsKeptAlive);
    } else if (!top.tensor_level) {
      g.cause = cause_slug(Cause::kNonTensorDriverAllocations);
    } else if (many_together) {
      g.cause = cause_slug(Cause::kAutogradGraphKeptAlive);
    } else {
      g.cause = cause_slug(Cause::kTensorsKeptAlive);
    }
    if (g.cause == cause_slug(Cause::kAutogradGraphKeptAlive)) {
      g.cause_text =
          "an autograd graph is kept alive: a tensor that still has grad_fn is stored across "
          "steps, "
          "so every activation saved for its backward pass stays in memory";
      g.fix =
          "keep loss.item() or .detach() instead of the tensor, and run evaluation under "
          "torch.no_grad()";
    } else if (g.cause == cause_slug(Cause::kTensorsKeptAlive)) {
      g.cause_text =
          "tensors are kept alive by a Python reference (a list, dict, attribute, global, cache, "
          "exception or hook) that grows every step";
      g.fix =
          "stop keeping the tensors (bound the container, store .item() or .cpu() copies, or clear "
          "it each step)";
    } else {
      g.cause_text =
          "memory handed out by the CUDA driver outside PyTorch's allocator (an extension or "
          "library "
          "calling cudaMalloc) is never freed";
      g.fix = "free the buffers allocated at the frames shown, or reuse one buffer";
    }
    if (top_holder) {
      g.holder_json = top_holder->json;
      if (!top_holder->fix.empty()) g.fix = top_holder->fix;
    }
  } else if (!bounded.empty()) {
    g.cause = cause_slug(Cause::kBoundedGrowth);
    g.cause_text =
        stopped_only
            ? stopped_growth_text(bounded.front())
            : "memory grew only inside a bounded container; it stops growing at the container's "
              "limit";
    g.holder_json = holder(bounded.front().site_id) ? holder(bounded.front().site_id)->json : "";
  }
  if (g.verdict != Verdict::kLeak && g.pool_reserved_bytes_per_step > 0) {
    g.note =
        "reserved memory grows while live tensors do not: the allocator is caching or fragmenting, "
        "not leaking (torch.cuda.empty_cache() would hide this, not fix anything)";
  }
  describe_lost_events(growth, g);
  g.sites = std::move(leaking);
  for (auto& s : bounded) g.sites.push_back(std::move(s));
  return g;
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
  auto library_loop = [&](std::size_t i) {
    if (!trusted_verdict || order[i]->clock.source != trace::StepSource::kAllocationPeriod)
      return false;
    auto frame = finder_.loop_frame(order[i]->clock.clock, catalog_);
    return frame && frame->internal;
  };
  // A loop the finder followed first and then found inside another (a
  // batch's per-request loop, before the serving loop around it showed):
  // its iterations are pieces of the other's, and what "grew" between them
  // is the other iteration's work in flight.
  auto inner_loop = [&](std::size_t i) {
    if (order[i]->clock.source != trace::StepSource::kAllocationPeriod) return false;
    const FoundLoop* loop = finder_.loop(order[i]->clock.clock);
    return loop != nullptr && loop->retired;
  };
  // The phase the report is about: a leaking one (the fastest), else one
  // that reached a verdict, else the one with the most iterations; time
  // windows (and library loops, above) only when nothing else ticked.
  auto rank = [&](std::size_t i) {
    const GrowthReport& r = reports[i];
    int verdict = r.verdict == Verdict::kLeak ? 2 : r.verdict == Verdict::kNoLeak ? 1 : 0;
    bool windows = is_time_windows(*order[i]) || library_loop(i) || inner_loop(i);
    // Between phases with the same verdict, the program's own word first.
    int trust = -trust_rank(order[i]->clock.source);
    return std::make_tuple(!windows, verdict, verdict == 2 ? r.rate_bytes_per_step : 0.0, trust,
                           r.steps);
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
    if ((library_loop(i) || inner_loop(i)) && !(primary && i == *primary)) continue;
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
  if (g.verdict == Verdict::kNoLeak && !hidden_allocations_reason_.empty()) {
    g.verdict = Verdict::kNotYet;
    g.undecided_reason = hidden_allocations_reason_;
    return g;
  }
  g.undecided_reason = undecided_reason(g);
  return g;
}

std::string ProcessAnalysis::undecided_reason(const GrowthReport& primary) {
  if (primary.verdict != Verdict::kNotYet) return "";
  double seconds = last_time_ns_ > first_time_ns_
                       ? static_cast<double>(last_time_ns_ - first_time_ns_) / 1e9
                       : 0;
  std::uint64_t needed = options_.growth.warmup_steps + options_.growth.min_steps;
  if (primary.step_source == trace::step_source_name(trace::StepSource::kTimeWindow)) {
    return fmt::format(
        "no repeating loop was found in {:.1f} s of the program ({} allocations), and it "
        "marks no steps; mark each iteration with gpuleak.step() (a verdict needs {} "
        "iterations)",
        seconds, allocations_, needed);
  }
  return fmt::format("only {} {} so far; a verdict needs {} ({} warm-up)", primary.steps,
                     primary.phase.empty() ? "steps" : primary.phase, needed,
                     options_.growth.warmup_steps);
}

LeakGroup ProcessAnalysis::make_group(std::uint32_t stack_id) {
  LeakGroup g;
  g.stack_ids.push_back(stack_id);
  g.frames = catalog_.frames(stack_id);
  g.site = choose_site(g.frames);
  return g;
}

std::vector<LeakGroup> ProcessAnalysis::group_live(std::size_t limit) {
  struct Totals {
    std::uint64_t bytes = 0, count = 0;
    MemoryKind kind = MemoryKind::kDevice;
    std::uint32_t api = 0;
    std::int32_t device = -1;
  };
  std::map<std::pair<std::uint32_t, MemoryKind>, Totals> by_stack;
  live_.for_each([&](const LiveAllocation& a) {
    Totals& t = by_stack[{a.stack_id, a.kind}];
    t.bytes += a.size;
    t.count += 1;
    t.kind = a.kind;
    t.api = a.api;
    t.device = a.device;
  });
  std::map<std::string, LeakGroup> merged;
  for (const auto& [key, t] : by_stack) {
    LeakGroup g = make_group(key.first);
    std::string signature = frame_signature(g.frames, t.kind);
    auto [it, inserted] = merged.try_emplace(signature, std::move(g));
    LeakGroup& m = it->second;
    if (!inserted) m.stack_ids.push_back(key.first);
    m.bytes += t.bytes;
    m.allocations += t.count;
    m.kind = t.kind;
    m.api = catalog_.api_name(t.api);
    m.device = t.device;
  }
  std::vector<LeakGroup> out;
  for (auto& [signature, g] : merged) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.allocations > b.allocations;
  });
  if (limit && out.size() > limit) out.resize(limit);
  return out;
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
  r.torch_tracking_json = torch_tracking_;
  r.clock_json = clock_;
  r.distributed_json = distributed_;
  r.capture_backend_json = capture_backend_;
  r.framework_tracking_json = framework_tracking_;
  r.collector_disabled = collector_disabled_;
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
  r.lost_ranged_seqs = lost_ranged_seqs_;
  r.lost_counted_seqs = lost_counted_seqs_;
  r.peak_live_bytes = peak_live_bytes_;
  r.duration_s = last_time_ns_ > first_time_ns_
                     ? static_cast<double>(last_time_ns_ - first_time_ns_) / 1e9
                     : 0;

  for (LeakGroup& g : group_live(0)) {
    std::string origin = g.stack_ids.empty() ? "" : catalog_.origin(g.stack_ids.front());
    if (!is_tensor_kind(g.kind) && origin == kCachingAllocator) {
      g.suppressed = true;
      g.suppressed_by = "cached by PyTorch's caching allocator (released when the process exits)";
    } else if (!is_tensor_kind(g.kind) && origin == kCupyPool && pool_blocks_seen_) {
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
  return r;
}

}  // namespace gpuleak::analysis
