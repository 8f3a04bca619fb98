#include "report/holder_text.h"

#include <fmt/format.h>

#include "report/file_names.h"

namespace gpuleak::report {

namespace {

// "local of evaluate (eval.py:60)" -> "local of evaluate"
std::string short_owner(std::string owner) {
  if (!owner.empty() && owner.back() == ')') {
    auto open = owner.rfind(" (");
    if (open != std::string::npos) owner.erase(open);
  }
  return owner;
}

// A statement as written, without its trailing comment.
std::string without_comment(std::string statement) {
  if (auto hash = statement.find("  #"); hash != std::string::npos) statement.erase(hash);
  return statement;
}

}  // namespace

std::string holder_text(const std::optional<analysis::HolderAnswer>& answer) {
  if (!answer || !answer->holder) return {};
  const analysis::Holder& holder = *answer->holder;
  std::string text = holder.type.empty() ? "?" : holder.type;
  if (!holder.name.empty()) text += " `" + holder.name + "`";
  if (!holder.owner.empty()) {
    text += " (" + holder.owner;
    if (holder.held_in && !holder.held_in->empty()) text += ", in " + *holder.held_in;
    text += ")";
  }
  if (holder.element && !holder.element->empty()) text += "; each element: " + *holder.element;
  if (answer->graph_tensors_per_element && *answer->graph_tensors_per_element > 0) {
    text += fmt::format(", one autograd graph of {} tensors per element",
                        *answer->graph_tensors_per_element);
  }
  if (holder.bounded && holder.maxlen) text += fmt::format(", bounded: maxlen {}", *holder.maxlen);
  if (answer->walk_timed_out) {
    text +=
        " (the holder search ran out of time there: an object above it may be what keeps it;"
        " GPULEAK_HOLDER_SECONDS gives it more)";
  }
  return text;
}

std::string kept_at_text(const std::optional<analysis::HolderAnswer>& answer) {
  if (!answer || !answer->holder || !answer->holder->kept_at) return {};
  const analysis::Holder& holder = *answer->holder;
  const analysis::KeepingStatement& kept = *holder.kept_at;
  if (kept.file.empty() || !kept.line) return {};
  std::string text = fmt::format("{}:{}", base_name(kept.file), *kept.line);
  std::string statement = without_comment(kept.statement.value_or(""));
  if (!statement.empty()) text += "  " + statement;
  std::string owner =
      short_owner(holder.held_in && !holder.held_in->empty() ? *holder.held_in : holder.owner);
  if (!holder.name.empty() || !owner.empty()) {
    text += "  (" + holder.name + (holder.name.empty() || owner.empty() ? "" : ", ") + owner + ")";
  }
  if (const auto& caller = kept.called_from) {
    text += fmt::format("; called from {}:{}", base_name(caller->file), *caller->line);
    std::string call = without_comment(caller->statement.value_or(""));
    if (!call.empty()) text += "  " + call;
  }
  return text;
}

std::string growth_start_text(std::uint64_t first_growing_step, std::uint64_t warmup_steps,
                              const std::string& noun) {
  if (first_growing_step <= warmup_steps) return "since warm-up";
  return fmt::format("since {} {}", noun, first_growing_step);
}

}  // namespace gpuleak::report
