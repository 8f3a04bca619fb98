// The analysis of one traced process: feed it the trace's records in order
// (EventSequencer) and ask, at any point, for the growth verdict, or at the
// end, for the whole report.
//
// The same object serves `gpuleak report` (a finished trace) and
// `gpuleak run` (a trace still being written: verdicts while the job runs).
//
// Steps come from several clocks (clock_arbiter.h): the program's
// StepRecords (gpuleak.step(), optimizer steps, DataLoader batches) and the
// loops the analysis finds in the allocation stream (step_finder.h);
// a program where nothing repeats gets time windows (`time_window_s`). Each
// clock's steps, inside each phase the program names (gpuleak.phase()), make
// a *phase* with its own series and verdict, so a leak during evaluation is
// judged over evaluation batches, not mixed with training steps.
//
// The class is defined by concern: feeding records (process_analysis.cpp),
// iteration boundaries and phases (phase_boundaries.cpp), the process's
// annotations (process_annotations.cpp), the growth verdict
// (growth_verdict.cpp, with leak_cause.h), phases in words
// (phase_descriptions.cpp) and the whole report (process_report.cpp).
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/export_detail.h"
#include "analysis/growth/growth_tracker.h"
#include "analysis/growth/holder_findings.h"
#include "analysis/growth/timeline_sampler.h"
#include "analysis/growth/vmm_site_pairs.h"
#include "analysis/model/live_set.h"
#include "analysis/model/report_model.h"
#include "analysis/model/stack_catalog.h"
#include "analysis/processes/process_activity.h"
#include "analysis/steps/clock_arbiter.h"
#include "analysis/steps/step_finder.h"
#include "analysis/suppressions.h"
#include "analysis/tracked_block_window.h"
#include "trace/records.h"

namespace gpuleak::analysis {

struct AnalysisOptions {
  GrowthOptions growth;
  double time_window_s = 1.0;
  Suppressions suppressions;
  StepFinderOptions step_finder;
  // Find loops in the allocation stream (off: only the program's marks and
  // time windows, as before).
  bool find_loops = true;
  // At most this many phases get series of their own; steps of further
  // clocks are counted, not tracked.
  std::size_t max_phases = 12;
  SourceLookup source_lookup;  // where source text may come from (analysis/model/source_lines.h)
  // What an export needs beyond the report (analysis/export_detail.h);
  // ProcessReport::export_detail holds it.
  std::optional<ExportRequest> export_request;
  // Only the events of this `gpuleak.track()` block (tracked_block_window.h).
  std::optional<std::uint64_t> tracked_block;
};

class ProcessAnalysis {
 public:
  explicit ProcessAnalysis(AnalysisOptions options = {});

  void consume(const trace::Record& record);
  // The trace has ended: decide the iterations still held (build_report
  // calls it too). Live analyses never call it.
  void finish();
  // Called when the trace ended early; the report says so.
  void set_trace_error(const std::string& message, std::uint64_t offset);
  // What is wrong with a trace that still read (trace/trace_damage.h); the
  // report says so, and its verdict is not a clean one.
  void set_damage(std::vector<std::string> damage) { damage_ = std::move(damage); }
  // How many lost sequence numbers the lost records listed, or only counted.
  void set_lost_seqs(std::uint64_t ranged, std::uint64_t counted) {
    lost_ranged_seqs_ = ranged;
    lost_counted_seqs_ = counted;
  }

  // Sites found growing so far that are not known to be bounded, in order of
  // detection (for live messages).
  std::vector<std::uint32_t> detected_sites() const;
  bool python_active() const { return torch_tracking_.has_value(); }
  // The process ran Python code: the package announced itself, or a stack
  // holds a Python frame. A process that did not gets no Python advice.
  bool runs_python() const {
    return python_active() || python_loop_.has_value() || catalog_.has_python_code();
  }
  std::optional<HolderFinding> holder(std::uint32_t site_id) const;
  // [address, size] of live allocations of a site made after warm-up.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> recent_allocations(std::uint32_t site_id,
                                                                          std::size_t limit) const;

  GrowthReport growth_report();
  ProcessReport build_report(const std::string& trace_path);

  StackCatalog& catalog() { return catalog_; }
  const trace::ProcessRecord& process() const { return process_; }
  // Boundaries of every phase together.
  std::uint64_t boundaries() const { return boundaries_; }

 private:
  // One clock's steps inside one named phase of the program, with the
  // series and detections of its own growth tracker.
  struct Phase {
    std::string label;  // the program's phase name (gpuleak.phase()), or ""
    ClockKey clock;
    GrowthTracker growth;
    // Samples at the recent boundaries (the trend window).
    RecentValues rss_at_boundary, reserved_at_boundary;
    // First boundary index at which each site was found growing, and its
    // latest trend.
    std::map<std::uint32_t, std::uint64_t> detected_at;
    std::vector<std::uint32_t> detection_order;
    std::map<std::uint32_t, SiteTrend> latest_trend;
    TimelineSampler timeline;
    // The pool's bytes in use (metric pool_used_bytes) at each boundary
    // since the first sample: what a framework that hides its arrays in a
    // pool (JAX preallocating) is judged by. `pool_fresh` counts the
    // boundaries with a sample taken since the one before (the package reads
    // the pool at each time round the main script's loop).
    RecentValues pool_used_at_boundary;
    std::uint64_t pool_fresh = 0;
    std::uint64_t pool_samples_seen = 0;  // pool_used_samples_ at the last boundary
    std::uint64_t pool_first_boundary = 0;
    std::optional<SiteTrend> pool_trend;  // growing now (series_trend), if so
    // Samples of each metric counted at this phase's last boundary: a row
    // shows a sample only when one was taken since (a fast loop's steps
    // would otherwise repeat one stale reading as a flat line).
    std::uint64_t rss_samples_seen = 0, device_used_samples_seen = 0, reserved_samples_seen = 0;
    std::optional<std::uint64_t> pool_detected_at;
    // When its first and latest boundaries came (trace time): whether a loop
    // was over before another began.
    std::uint64_t first_boundary_ns = 0;
    std::uint64_t last_boundary_ns = 0;
    explicit Phase(const GrowthOptions& options)
        : growth(options),
          rss_at_boundary(options.window_steps),
          reserved_at_boundary(options.window_steps),
          pool_used_at_boundary(options.window_steps) {}
  };

  void apply(const trace::Record& record);
  void on_compaction(const trace::CompactionRecord& compaction);
  void drain_finder();
  void advance_time_windows(std::uint64_t time_ns);
  void on_step_boundary(ClockKey clock, std::uint64_t step_number, std::uint64_t time_ns);
  Phase* phase_for(ClockKey clock);
  void add_boundary(Phase& phase, std::uint64_t step_number, std::uint64_t time_ns);
  void evaluate(Phase& phase);
  void on_annotation(const trace::AnnotationRecord& record);
  LeakGroup make_group(std::uint32_t stack_id);
  std::vector<LeakGroup> group_live(std::size_t limit);
  // Sample blocks and holders of the groups a tracked block left behind.
  void describe_left_behind(std::vector<LeakGroup>& groups) const;
  // Live bytes and allocations per (stack, kind), as group_live counts them.
  using LiveTotals = std::map<std::pair<std::uint32_t, trace::MemoryKind>,
                              std::pair<std::uint64_t, std::uint64_t>>;
  LiveTotals live_totals() const;
  // Groups of those totals, merged by how their frames read, largest first.
  std::vector<LeakGroup> group_totals(const LiveTotals& totals, std::size_t limit);
  ExportDetail export_detail();
  double seconds_since_start(std::uint64_t time_ns) const {
    return time_ns > first_time_ns_ ? static_cast<double>(time_ns - first_time_ns_) / 1e9 : 0;
  }
  // A growing site as reports show it, from its trend: the same whichever
  // phase it grew in (the caller adds what the phase knows of its stop).
  SiteGrowth describe_site(const SiteTrend& trend);
  GrowthReport phase_report(const Phase& phase);
  // The step marks a compaction summary kept of this phase's clock, in step order.
  std::vector<const trace::StepSummaryRecord*> summarized_marks(const Phase& phase) const;
  // A compacted trace: growth that was already going on where the raw
  // events begin is dated from the summary's steps (what was live at each),
  // not from the first raw step. Returns the step it began at, or nothing
  // when the summary says nothing older (growth began in the raw part).
  std::optional<std::uint64_t> date_from_summary(const Phase& phase,
                                                 std::uint64_t first_growing_step,
                                                 double rate_bytes_per_step) const;
  // The growth report of the primary phase, with every phase summarised;
  // `primary_phase` (if given) receives that phase, or null.
  GrowthReport growth_report_of_phases(const Phase** primary_phase);
  std::string phase_name(const Phase& phase);
  std::string phase_reason(const Phase& phase);
  std::string undecided_reason(const GrowthReport& primary);
  // A compacted trace whose raw part is too short to judge: judges `growth`,
  // the report of `phase`, from the summary's step totals instead
  // (growth_verdict.cpp says how).
  void judge_from_step_summary(const Phase& phase, GrowthReport& growth) const;
  // Why the main script's loop could not be followed, in words, or "".
  std::string python_loop_note() const;
  // Whether a phase is judged by the pool's bytes in use: the framework
  // hides its arrays in a pool and the pool was read at enough boundaries.
  bool pool_judged(const Phase& phase) const;
  // The pool's growth as a site of the report: where the phase's loop is.
  SiteGrowth pool_site(const Phase& phase) const;
  // A segment a framework's pool asked the driver for (reserved memory).
  bool is_pool_segment(std::uint32_t site_id);
  // Address space and mappings hold no memory of their own.
  static bool tracked_for_growth(trace::MemoryKind kind) {
    return kind != trace::MemoryKind::kAddressRange && kind != trace::MemoryKind::kVmmMapping;
  }
  bool is_time_windows(const Phase& phase) const {
    return phase.clock.source == trace::StepSource::kTimeWindow;
  }

  AnalysisOptions options_;
  trace::ProcessRecord process_;
  StackCatalog catalog_;
  ProcessActivity activity_{catalog_};  // how the process used CUDA (ProcessReport::cuda_use)
  LiveSet live_;
  StepFinder finder_;
  ClockArbiter arbiter_;
  std::vector<std::unique_ptr<Phase>> phases_;
  std::string label_;  // the program's current phase name
  std::map<ClockKey, std::string> clock_descriptions_;
  std::uint64_t boundaries_ = 0;
  std::uint64_t untracked_steps_ = 0;  // steps of clocks beyond max_phases
  bool finished_ = false;
  bool pool_blocks_seen_ = false;  // a framework's pool blocks are tracked one by one

  bool exited_ = false;
  std::string trace_error_;
  std::uint64_t trace_error_offset_ = 0;
  std::vector<std::string> damage_;
  std::uint64_t lost_ranged_seqs_ = 0, lost_counted_seqs_ = 0;
  // The process's annotations about itself (analysis/model/annotation_values.h);
  // the last one of each kind counts.
  std::optional<TorchTracking> torch_tracking_;
  std::optional<EventClock> clock_;
  std::optional<DistributedRank> distributed_;
  std::optional<CaptureBackend> capture_backend_;
  std::optional<FrameworkTracking> framework_tracking_;
  // Set when that annotation says a pool hides the arrays: why the run is not clean.
  std::string hidden_allocations_reason_;
  // Set when it says the framework's device memory holds only its arrays
  // (JAX's platform allocator): that memory is judged as tensors are.
  bool device_memory_holds_arrays_ = false;
  std::string collector_disabled_;  // why the collector turned itself off, if it did
  std::optional<PythonLoopAnnotation> python_loop_;  // the package's python_loop annotation
  std::optional<AttachSession> attach_;              // the `attach` annotations
  std::string python_loop_unavailable_;  // why it could not follow the loop, if it said so
  // Where each Python loop clock's loop is (its iteration_clock annotation).
  std::map<ClockKey, Site> clock_sites_;
  // Python loop clocks that another clock's loop encloses (its
  // iteration_clock annotation's `encloses`): never the report's phase over it.
  std::set<ClockKey> enclosed_clocks_;
  std::uint64_t allocations_ = 0, frees_ = 0, unmatched_frees_ = 0, lost_ = 0;
  // A compacted trace's summary: events below compaction_->through_seq are
  // summarized, and those it kept come first, out of the loop's order.
  std::optional<trace::CompactionRecord> compaction_;
  std::vector<trace::StepSummaryRecord> summarized_steps_;
  // Allocations the summaries say they summarized, and the live ones they
  // kept: a consistent trace never keeps more than it summarized.
  std::uint64_t summary_allocations_ = 0;
  std::uint64_t summary_kept_allocations_ = 0;
  bool summarized(std::uint64_t seq) const { return compaction_ && seq < compaction_->through_seq; }
  std::uint64_t peak_live_bytes_ = 0;
  std::uint64_t first_time_ns_ = 0, last_time_ns_ = 0;

  // Time windows, until some other clock marks a step.
  bool real_steps_ = false;
  std::uint64_t next_window_ns_ = 0;

  // Latest samples.
  std::optional<std::uint64_t> host_rss_, device_used_, device_total_, pool_reserved_, pool_used_;
  std::uint64_t pool_used_samples_ = 0;
  std::uint64_t host_rss_samples_ = 0, device_used_samples_ = 0, pool_reserved_samples_ = 0;
  // The next sequence number expected: a jump means events were lost there.
  std::uint64_t next_seq_ = 0;
  // Events were lost so far (a gap in the sequence numbers, or a LostRecord).
  bool events_missing_ = false;

  HolderFindings holders_;
  std::optional<ExportRecorder> export_;            // when options_.export_request asks
  std::optional<TrackedBlockWindow> block_window_;  // when options_.tracked_block asks
  LiveTotals peak_totals_;                          // what was live at the peak, for export_
  VmmSitePairs vmm_site_pairs_;
  // The holder found for a site; for a virtual-memory site without one, the
  // holder found for its mapping site (vmm_site_pairs.h).
  const HolderFinding* find_holder(std::uint32_t site_id) const;

  struct RawOutOfMemory {
    trace::AllocFailedRecord record;
    std::uint64_t live_bytes = 0, live_allocations = 0;
    std::vector<std::pair<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>>> top_stacks;
  };
  std::vector<RawOutOfMemory> out_of_memory_;
};

}  // namespace gpuleak::analysis
