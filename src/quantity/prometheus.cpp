#include "quantity/prometheus.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace gpuleak::quantity {

namespace {

bool is_name_start(char c, bool allow_colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
}

bool is_name_char(char c, bool allow_colon) {
  return is_name_start(c, allow_colon) || (c >= '0' && c <= '9');
}

const char* type_word(MetricType type) {
  switch (type) {
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kUntyped:
      return "untyped";
  }
  return "untyped";
}

}  // namespace

bool is_valid_metric_name(std::string_view name) {
  if (name.empty() || !is_name_start(name[0], true)) return false;
  for (char c : name) {
    if (!is_name_char(c, true)) return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || !is_name_start(name[0], false)) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return false;  // reserved
  for (char c : name) {
    if (!is_name_char(c, false)) return false;
  }
  return true;
}

namespace {

// Both escapings of the format: \ and newline always, " only in label values.
std::string escape_exposition_text(std::string_view text, bool escape_quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  return escape_exposition_text(value, /*escape_quote=*/true);
}

std::string escape_help_text(std::string_view help) {
  return escape_exposition_text(help, /*escape_quote=*/false);
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Byte counts are integers well inside 2^53: print them exactly, no exponent.
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return fmt::format("{}", static_cast<long long>(value));
  }
  return fmt::format("{}", value);
}

void ExpositionWriter::family(std::string_view name, std::string_view help, MetricType type) {
  if (!is_valid_metric_name(name)) {
    throw std::logic_error(fmt::format("invalid Prometheus metric name '{}'", name));
  }
  std::string key(name);
  if (!written_.insert(key).second) {
    throw std::logic_error(fmt::format("metric family '{}' written twice", name));
  }
  current_ = key;
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape_help_text(help), name,
                       type_word(type));
}

void ExpositionWriter::sample(const MetricLabels& labels, double value) {
  if (current_.empty()) throw std::logic_error("Prometheus sample written before its family");
  text_ += current_;
  if (!labels.empty()) {
    text_ += '{';
    bool first = true;
    for (const auto& [name, label_value] : labels) {
      if (!is_valid_label_name(name)) {
        throw std::logic_error(fmt::format("invalid Prometheus label name '{}'", name));
      }
      if (!first) text_ += ',';
      first = false;
      text_ += name;
      text_ += "=\"";
      text_ += escape_label_value(label_value);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += format_sample_value(value);
  text_ += '\n';
}

}  // namespace gpuleak::quantity
