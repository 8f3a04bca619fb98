#include "report/holder_text.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace gpuleak::report {

std::string holder_text(const std::string& holder_json) {
  if (holder_json.empty()) return {};
  auto h = nlohmann::json::parse(holder_json, nullptr, false);
  if (!h.is_object() || !h.contains("holder") || !h["holder"].is_object()) return {};
  const auto& holder = h["holder"];
  auto text_of = [&holder](const char* key) -> std::string {
    auto it = holder.find(key);
    return it != holder.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string type = text_of("type");
  std::string text = type.empty() ? "?" : type;
  if (std::string name = text_of("name"); !name.empty()) text += " `" + name + "`";
  if (std::string owner = text_of("owner"); !owner.empty()) text += " (" + owner + ")";
  auto graph = h.find("graph_tensors_per_element");
  if (graph != h.end() && graph->is_number()) {
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

}  // namespace gpuleak::report
