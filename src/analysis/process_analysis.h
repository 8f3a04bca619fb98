// The analysis of one traced process: feed it the trace's records in order
// (EventSequencer) and ask, at any point, for the growth verdict, or at the
// end, for the whole report.
//
// The same object serves `gpuleak report` (a finished trace) and
// `gpuleak run` (a trace still being written: verdicts while the job runs).
//
// Step boundaries are the program's StepRecords; a program that reports
// none gets time windows (`time_window_s`) instead, until a real step
// appears, which then replaces the windows.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/growth_tracker.h"
#include "analysis/live_set.h"
#include "analysis/report_model.h"
#include "analysis/stack_catalog.h"
#include "analysis/suppressions.h"
#include "trace/records.h"

namespace gpuleak::analysis {

struct AnalysisOptions {
  GrowthOptions growth;
  double time_window_s = 1.0;
  Suppressions suppressions;
};

// What the Python package found holding a growing site's memory.
struct HolderFinding {
  std::string json;  // the site's object from the holder annotation
  std::string kind;  // "tensor", "graph", "unknown"
  bool bounded = false;
  std::string fix;
  std::string description;  // "list `losses` (module __main__)"
};

class ProcessAnalysis {
 public:
  explicit ProcessAnalysis(AnalysisOptions options = {});

  void consume(const trace::Record& record);
  // Called when the trace ended early; the report says so.
  void set_trace_error(const std::string& message, std::uint64_t offset);

  // Sites found growing so far that are not known to be bounded, in order of
  // detection (for live messages).
  std::vector<std::uint32_t> detected_sites() const;
  bool python_active() const { return !torch_tracking_.empty(); }
  std::optional<HolderFinding> holder(std::uint32_t site_id) const;
  // [address, size] of live allocations of a site made after warm-up.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> recent_allocations(std::uint32_t site_id,
                                                                          std::size_t limit) const;

  GrowthReport growth_report();
  ProcessReport build_report(const std::string& trace_path);

  StackCatalog& catalog() { return catalog_; }
  const trace::ProcessRecord& process() const { return process_; }
  std::uint64_t boundaries() const { return growth_.boundaries(); }

 private:
  void on_step(std::uint64_t step_number, std::uint64_t time_ns, trace::StepSource source);
  void add_boundary(std::uint64_t step_number, std::uint64_t time_ns);
  void evaluate();
  void on_annotation(const trace::AnnotationRecord& record);
  LeakGroup make_group(std::uint32_t stack_id);
  std::vector<LeakGroup> group_live(std::size_t limit);
  SiteGrowth describe_site(const SiteTrend& trend);

  AnalysisOptions options_;
  trace::ProcessRecord process_;
  StackCatalog catalog_;
  LiveSet live_;
  GrowthTracker growth_;

  bool exited_ = false;
  std::string trace_error_;
  std::uint64_t trace_error_offset_ = 0;
  std::string torch_tracking_;
  std::string clock_;  // the collector's `clock` annotation (JSON)
  std::string distributed_;
  std::uint64_t allocations_ = 0, frees_ = 0, unmatched_frees_ = 0, lost_ = 0;
  std::uint64_t peak_live_bytes_ = 0;
  std::uint64_t first_time_ns_ = 0, last_time_ns_ = 0;

  // Step boundaries.
  bool real_steps_ = false;
  trace::StepSource step_source_ = trace::StepSource::kTimeWindow;
  std::uint64_t next_window_ns_ = 0;

  // Latest samples, and their values at each boundary.
  std::optional<std::uint64_t> host_rss_, device_used_, device_total_, pool_reserved_;
  std::vector<double> rss_at_boundary_, reserved_at_boundary_;

  // Detection: first boundary index at which each site was found growing,
  // and its latest trend.
  std::map<std::uint32_t, std::uint64_t> detected_at_;
  std::vector<std::uint32_t> detection_order_;
  std::map<std::uint32_t, SiteTrend> latest_trend_;
  std::map<std::uint32_t, HolderFinding> holders_;

  struct RawOutOfMemory {
    trace::AllocFailedRecord record;
    std::uint64_t live_bytes = 0, live_allocations = 0;
    std::vector<std::pair<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>>> top_stacks;
  };
  std::vector<RawOutOfMemory> out_of_memory_;
  Timeline timeline_;
};

}  // namespace gpuleak::analysis
