// ProcessAnalysis, what the traced process says about itself in its
// annotations: how it was tracked (torch, a framework's arrays, the capture
// backend, the clock), its rank, the phases and clocks it names, why the
// collector turned itself off, and the holders the Python package found.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analysis/annotation_fields.h"
#include "analysis/process_analysis.h"

namespace gpuleak::analysis {

namespace {

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

}  // namespace

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
    // A Python loop's clock also says where the loop is: {"file", "line", "function"}.
    std::string file = text_field(clock, "file");
    if (!file.empty()) {
      Site site;
      site.file = file.substr(0, 4096);
      site.function = text_field(clock, "function").substr(0, 200);
      auto line = clock.find("line");
      if (line != clock.end() && line->is_number_unsigned() &&
          line->get<std::uint64_t>() <= UINT32_MAX)
        site.line = static_cast<std::uint32_t>(line->get<std::uint64_t>());
      clock_sites_[key] = std::move(site);
    }
    return;
  }
  if (record.key == "python_loop") {
    // {"available": false, "reason": "..."} when the package cannot follow
    // the main script's loop (Python before 3.12, another tool's ids taken).
    python_loop_ = record.value;
    nlohmann::json loop = nlohmann::json::parse(record.value, nullptr, false);
    python_loop_unavailable_.clear();
    if (loop.is_object() && loop.contains("available") && loop["available"].is_boolean() &&
        !loop["available"].get<bool>()) {
      python_loop_unavailable_ = text_field(loop, "reason").substr(0, 300);
      if (python_loop_unavailable_.empty()) python_loop_unavailable_ = "unknown reason";
    }
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
  if (record.key == "holder") holders_.add_answer(record.value);
}

}  // namespace gpuleak::analysis
