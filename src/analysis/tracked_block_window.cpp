#include "analysis/tracked_block_window.h"

#include <nlohmann/json.hpp>
#include <variant>

#include "analysis/model/annotation_fields.h"

namespace gpuleak::analysis {

bool TrackedBlockWindow::admits(const trace::Record& record) {
  if (const auto* annotation = std::get_if<trace::AnnotationRecord>(&record)) {
    on_annotation(*annotation);
    return true;
  }
  if (std::holds_alternative<trace::ContextRecord>(record) ||
      std::holds_alternative<trace::ExitRecord>(record) ||
      std::holds_alternative<trace::LostRecord>(record))
    return true;
  return state_ == State::kInside;
}

void TrackedBlockWindow::on_annotation(const trace::AnnotationRecord& annotation) {
  if (annotation.key != kTrackedBlockAnnotation) return;
  // The value is the traced process's JSON: damaged or crafted input reads
  // as no mark at all.
  nlohmann::json value = nlohmann::json::parse(annotation.value, nullptr, false);
  std::optional<std::uint64_t> block = optional_count_field(value, "block");
  if (!block || *block != block_) return;
  std::string event = text_field(value, "event");
  if (event == "begin" && state_ == State::kBefore) state_ = State::kInside;
  if (event == "end" && state_ == State::kInside) state_ = State::kAfter;
}

}  // namespace gpuleak::analysis
