// Writes the Prometheus text exposition format (version 0.0.4): the
// "# HELP"/"# TYPE" lines of each metric family followed by its samples,
// with label values and help text escaped as the format requires.
//
// The writer knows nothing about GPUs; callers name their families and
// labels. Each family is written once with all its samples together (the
// format requires it); misuse (a repeated family, a sample before any
// family, an invalid name) throws std::logic_error because it is a bug in
// the caller, never a property of the data. Label *values* may be anything.
//
// Not thread-safe: one writer per response.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gpuleak::quantity {

// The Content-Type a /metrics response carries.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kGauge, kCounter, kUntyped };

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class ExpositionWriter {
 public:
  // Starts a family. `name` must match [a-zA-Z_:][a-zA-Z0-9_:]*.
  void family(std::string_view name, std::string_view help, MetricType type);
  // One sample of the current family. Label names must match [a-zA-Z_][a-zA-Z0-9_]*
  // and not start with "__".
  void sample(const MetricLabels& labels, double value);

  const std::string& text() const { return text_; }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
  std::string current_;
  std::unordered_set<std::string> written_;
};

// Escaping rules of the format: label values escape \, " and newline; help
// text escapes \ and newline.
std::string escape_label_value(std::string_view value);
std::string escape_help_text(std::string_view help);
// "+Inf", "-Inf", "NaN", integers without exponent, others shortest round-trip.
std::string format_sample_value(double value);
bool is_valid_metric_name(std::string_view name);
bool is_valid_label_name(std::string_view name);

}  // namespace gpuleak::quantity
