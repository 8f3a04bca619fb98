// Fields of the JSON that a traced process writes into its annotations
// (framework_tracking, capture_backend, holder, ...), for the analysis's
// readers of them (annotation_values.h, holder_findings.h). The trace is
// input, and input may be damaged or crafted: a field of the wrong type
// reads as missing, never as an exception.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
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

// A string field, or nothing when it is missing, null or not a string.
inline std::optional<std::string> optional_text_field(const nlohmann::json& object,
                                                      const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// An integer field (a whole number in JSON), or nothing.
inline std::optional<std::int64_t> optional_integer_field(const nlohmann::json& object,
                                                          const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > INT64_MAX) return std::nullopt;
  return it->get<std::int64_t>();
}

// A boolean field, or nothing when it is missing or not a boolean.
inline std::optional<bool> optional_flag_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

// A number field (whole or not), or nothing.
inline std::optional<double> optional_number_field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// A non-negative integer field, or nothing.
inline std::optional<std::uint64_t> optional_count_field(const nlohmann::json& object,
                                                         const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

// An id: a non-negative integer no larger than `most` (a stack, site or
// clock id: 32 bits), or nothing.
inline std::optional<std::uint32_t> optional_id(const nlohmann::json& value,
                                                std::uint32_t most = UINT32_MAX) {
  if (!value.is_number_unsigned()) return std::nullopt;
  auto id = value.get<std::uint64_t>();
  if (id > most) return std::nullopt;
  return static_cast<std::uint32_t>(id);
}

// An id field (optional_id), or nothing.
inline std::optional<std::uint32_t> optional_id_field(const nlohmann::json& object, const char* key,
                                                      std::uint32_t most = UINT32_MAX) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  return optional_id(*it, most);
}

}  // namespace gpuleak::analysis
