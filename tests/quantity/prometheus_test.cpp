#include "quantity/prometheus.h"

#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

namespace gpuleak::quantity {
namespace {

TEST(PrometheusExposition, writes_help_type_and_labelled_samples) {
  ExpositionWriter writer;
  writer.family("gpuleak_gpu_memory_used_bytes", "Memory in use.", MetricType::kGauge);
  writer.sample({{"gpu_uuid", "GPU-1"}, {"gpu_index", "0"}}, 1073741824);
  writer.sample({{"gpu_uuid", "GPU-2"}, {"gpu_index", "1"}}, 0.5);
  writer.family("gpuleak_exporter_samples_total", "Samples.", MetricType::kCounter);
  writer.sample({}, 3);
  EXPECT_EQ(writer.text(),
            "# HELP gpuleak_gpu_memory_used_bytes Memory in use.\n"
            "# TYPE gpuleak_gpu_memory_used_bytes gauge\n"
            "gpuleak_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",gpu_index=\"0\"} 1073741824\n"
            "gpuleak_gpu_memory_used_bytes{gpu_uuid=\"GPU-2\",gpu_index=\"1\"} 0.5\n"
            "# HELP gpuleak_exporter_samples_total Samples.\n"
            "# TYPE gpuleak_exporter_samples_total counter\n"
            "gpuleak_exporter_samples_total 3\n");
}

TEST(PrometheusExposition, escapes_label_values_and_help) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_help_text("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");
}

TEST(PrometheusExposition, special_values_use_the_formats_spelling) {
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_sample_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_sample_value(150000000000.0), "150000000000");
  EXPECT_EQ(format_sample_value(-2.5), "-2.5");
}

TEST(PrometheusExposition, misuse_is_a_programming_error) {
  ExpositionWriter writer;
  EXPECT_THROW(writer.sample({}, 1), std::logic_error);
  EXPECT_THROW(writer.family("9starts_with_digit", "x", MetricType::kGauge), std::logic_error);
  writer.family("ok_name", "x", MetricType::kGauge);
  EXPECT_THROW(writer.family("ok_name", "again", MetricType::kGauge), std::logic_error);
  EXPECT_THROW(writer.sample({{"__reserved", "v"}}, 1), std::logic_error);
  EXPECT_THROW(writer.sample({{"bad-name", "v"}}, 1), std::logic_error);
  EXPECT_TRUE(is_valid_metric_name("ns:sub_name"));
  EXPECT_FALSE(is_valid_label_name("ns:label"));
}

}  // namespace
}  // namespace gpuleak::quantity
