// Fields of the JSON that a traced process writes into its annotations
// (framework_tracking, capture_backend, distributed, ...). The trace is
// input, and input may be damaged or crafted: a field of the wrong type
// reads as missing, never as an exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpuleak::analysis {

inline std::string text_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

inline bool flag_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return false;
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

inline int int_field(const nlohmann::json& object, const char* key, int otherwise) {
  if (!object.is_object()) return otherwise;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int>() : otherwise;
}

}  // namespace gpuleak::analysis
