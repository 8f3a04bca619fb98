#include "report/holder_text.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace gpuleak::report {

namespace {

using nlohmann::json;

std::string text_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The holder object of a site answer, or null.
const json* holder_of(const json& answer) {
  if (!answer.is_object()) return nullptr;
  auto it = answer.find("holder");
  return it != answer.end() && it->is_object() ? &*it : nullptr;
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "local of evaluate (eval.py:60)" -> "local of evaluate"
std::string short_owner(std::string owner) {
  if (!owner.empty() && owner.back() == ')') {
    auto open = owner.rfind(" (");
    if (open != std::string::npos) owner.erase(open);
  }
  return owner;
}

}  // namespace

std::string holder_text(const std::string& holder_json) {
  if (holder_json.empty()) return {};
  json answer = json::parse(holder_json, nullptr, false);
  const json* found = holder_of(answer);
  if (!found) return {};
  const json& holder = *found;
  std::string type = text_of(holder, "type");
  std::string text = type.empty() ? "?" : type;
  if (std::string name = text_of(holder, "name"); !name.empty()) text += " `" + name + "`";
  if (std::string owner = text_of(holder, "owner"); !owner.empty()) {
    text += " (" + owner;
    if (std::string held_in = text_of(holder, "held_in"); !held_in.empty())
      text += ", in " + held_in;
    text += ")";
  }
  if (std::string element = text_of(holder, "element"); !element.empty())
    text += "; each element: " + element;
  auto graph = answer.find("graph_tensors_per_element");
  if (graph != answer.end() && graph->is_number_integer() && graph->get<long>() > 0) {
    text += fmt::format(", one autograd graph of {} tensors per element", graph->get<long>());
  }
  auto bounded = holder.find("bounded");
  auto maxlen = holder.find("maxlen");
  if (bounded != holder.end() && bounded->is_boolean() && bounded->get<bool>() &&
      maxlen != holder.end() && maxlen->is_number()) {
    text += fmt::format(", bounded: maxlen {}", maxlen->get<long>());
  }
  return text;
}

std::string kept_at_text(const std::string& holder_json) {
  if (holder_json.empty()) return {};
  json answer = json::parse(holder_json, nullptr, false);
  const json* holder = holder_of(answer);
  if (!holder) return {};
  auto kept = holder->find("kept_at");
  if (kept == holder->end() || !kept->is_object()) return {};
  std::string file = text_of(*kept, "file");
  auto line = kept->find("line");
  if (file.empty() || line == kept->end() || !line->is_number_unsigned()) return {};
  std::string text = fmt::format("{}:{}", base_name(file), line->get<std::uint64_t>());
  std::string statement = text_of(*kept, "statement");
  // The statement as written, without a trailing comment.
  if (auto hash = statement.find("  #"); hash != std::string::npos) statement.erase(hash);
  if (!statement.empty()) text += "  " + statement;
  std::string name = text_of(*holder, "name");
  std::string owner =
      short_owner(text_of(*holder, "held_in").empty() ? text_of(*holder, "owner")
                                                      : text_of(*holder, "held_in"));
  if (!name.empty() || !owner.empty()) {
    text += "  (" + name + (name.empty() || owner.empty() ? "" : ", ") + owner + ")";
  }
  return text;
}

std::string growth_start_text(std::uint64_t first_growing_step, std::uint64_t warmup_steps,
                              const std::string& noun) {
  if (first_growing_step <= warmup_steps) return "since warm-up";
  return fmt::format("since {} {}", noun, first_growing_step);
}

}  // namespace gpuleak::report
