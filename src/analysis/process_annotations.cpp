// ProcessAnalysis, what the traced process says about itself in its
// annotations: how it was tracked (torch, a framework's arrays, the capture
// backend, the clock), its rank, the phases and clocks it names, and why the
// collector turned itself off. (The holders the Python package found are
// read in consume(), as they arrive.)
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analysis/model/annotation_fields.h"
#include "analysis/model/annotation_values.h"
#include "analysis/process_analysis.h"

namespace gpuleak::analysis {

namespace {

// Why no verdict may call the run clean when a framework hands out its arrays
// from a pool it reserved at start (JAX preallocates): nothing visible grows,
// which says nothing about the arrays inside. "" when the framework_tracking
// annotation says nothing is hidden.
std::string hidden_allocations_reason(const std::optional<FrameworkTracking>& framework) {
  if (!framework || !framework->hidden_allocations.value_or(false)) return "";
  std::string name = framework->framework.value_or("");
  std::string how = framework->how_to_see.value_or("");
  return fmt::format(
      "{} allocates its arrays from a pool it reserved at start, which the driver sees as one "
      "block: nothing visible grows, but that says nothing about the arrays inside it{}",
      name.empty() ? std::string("the framework") : name,
      how.empty() ? std::string() : "; run with " + how + " to see each array");
}

}  // namespace

void ProcessAnalysis::on_annotation(const trace::AnnotationRecord& record) {
  if (record.key == "torch_tracking") {
    torch_tracking_ = read_torch_tracking(record.value);
    return;
  }
  if (record.key == "attach") {
    read_attach_event(record.value, attach_);
    return;
  }
  if (record.key == "clock") {
    clock_ = read_event_clock(record.value);
    return;
  }
  if (record.key == "distributed") {
    distributed_ = read_distributed_rank(record.value);
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
    std::optional<std::uint32_t> source = optional_id_field(clock, "source", 0xff);
    std::optional<std::uint32_t> id = optional_id_field(clock, "clock");
    if (!source || !id) return;
    if (clock_descriptions_.size() >= 1000) return;
    ClockKey key{static_cast<trace::StepSource>(*source), *id};
    clock_descriptions_[key] = text_field(clock, "description").substr(0, 200);
    // A Python loop's clock also says where the loop is: {"file", "line", "function"}.
    std::string file = text_field(clock, "file");
    if (!file.empty()) {
      Site site;
      site.file = file.substr(0, 4096);
      site.function = text_field(clock, "function").substr(0, 200);
      site.line = optional_id_field(clock, "line").value_or(0);
      clock_sites_[key] = std::move(site);
    }
    // A Python loop's clock that took over from inner loops' clocks lists
    // them: their iterations are pieces of its own.
    auto encloses = clock.find("encloses");
    if (encloses != clock.end() && encloses->is_array()) {
      for (const auto& inner : *encloses) {
        std::optional<std::uint32_t> inner_id = optional_id(inner);
        if (!inner_id) continue;
        if (enclosed_clocks_.size() >= 1000) break;
        enclosed_clocks_.insert(ClockKey{key.source, *inner_id});
      }
    }
    return;
  }
  if (record.key == "python_loop") {
    // {"available": false, "reason": "..."} when the package cannot follow
    // the main script's loop (Python before 3.12, another tool's ids taken).
    python_loop_ = read_python_loop(record.value);
    python_loop_unavailable_.clear();
    if (python_loop_ && python_loop_->available == false) {
      python_loop_unavailable_ = python_loop_->reason.value_or("").substr(0, 300);
      if (python_loop_unavailable_.empty()) python_loop_unavailable_ = "unknown reason";
    }
    return;
  }
  if (record.key == "capture_backend") {
    capture_backend_ = read_capture_backend(record.value);
    return;
  }
  if (record.key == "framework_tracking") {
    framework_tracking_ = read_framework_tracking(record.value);
    hidden_allocations_reason_ = hidden_allocations_reason(framework_tracking_);
    device_memory_holds_arrays_ =
        framework_tracking_ && framework_tracking_->device_memory_holds_arrays.value_or(false);
    return;
  }
  if (record.key == "collector_disabled") {
    nlohmann::json value = nlohmann::json::parse(record.value, nullptr, false);
    collector_disabled_ = value.is_object() ? text_field(value, "reason") : record.value;
    if (collector_disabled_.empty()) collector_disabled_ = "unknown reason";
    return;
  }
  // `holder` answers never come here: consume() applies them as they arrive.
}

}  // namespace gpuleak::analysis
