#include "monitor/top_text.h"

#include <fmt/format.h>

#include <ctime>

#include "monitor/container_id.h"
#include "quantity/units.h"

namespace gpuleak::monitor {

namespace {

using quantity::format_bytes;
using quantity::format_duration_seconds;
using quantity::format_rate;

// Below this many points a slope is noise; show nothing rather than a guess.
constexpr std::size_t kMinPointsForSlope = 3;

std::string clock_time(std::int64_t unix_time_ms) {
  std::time_t seconds = static_cast<std::time_t>(unix_time_ms / 1000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

std::string trend_text(const TrendSummary& trend) {
  if (trend.points < kMinPointsForSlope) return "...";
  std::string text = format_rate(trend.slope_bytes_per_s, "s");
  if (trend.leak) text += " LEAK";
  return text;
}

std::string until_full_text(const TrendSummary& trend) {
  if (!trend.leak || !trend.seconds_until_full) return "-";
  return format_duration_seconds(*trend.seconds_until_full);
}

std::string cut(std::string line, std::size_t max_width) {
  if (max_width > 0 && line.size() > max_width) line.resize(max_width);
  return line;
}

}  // namespace

std::string render_top_text(const Sample& sample, const TopTextOptions& options) {
  std::string out;
  auto line = [&](const std::string& text) { out += cut(text, options.max_width) + "\n"; };

  line(fmt::format("gpuleak top  {}  sample {}, every {}, trends over the last {}",
                   clock_time(sample.unix_time_ms), sample.index + 1,
                   format_duration_seconds(options.interval_s),
                   format_duration_seconds(options.window_s)));
  if (!sample.nvml.available) {
    line("GPUs: " +
         (sample.nvml.message.empty() ? std::string("NVML unavailable") : sample.nvml.message));
  } else if (sample.devices.empty()) {
    line("GPUs: the driver reports none");
  }
  for (const auto& view : sample.devices) {
    const GpuDevice& d = view.device;
    line(fmt::format("GPU {}  {}  {}  used {} of {}  {}  full in {}", d.index, d.name, d.uuid,
                     format_bytes(d.memory_used_bytes), format_bytes(d.memory_total_bytes),
                     trend_text(view.used), until_full_text(view.used)));
    if (view.unaccounted_bytes > 0 && !d.processes.empty()) {
      line(
          fmt::format("       {} used by no listed process", format_bytes(view.unaccounted_bytes)));
    }
  }
  out += "\n";
  line(fmt::format("{:>8} {:<10} {:>10} {:<18} {:>10}  {:>10} {:<18} {:>8} {:1}  {:<36} {}", "PID",
                   "USER", "GPU MEM", "GPU TREND", "FULL IN", "HOST RSS", "RSS TREND", "RAM IN",
                   "S", "RELATION", "COMMAND"));
  if (sample.processes.empty()) {
    line(fmt::format("{:>8} no process holds GPU memory or has {} open", "-",
                     sample.device_file_glob));
  }
  for (const auto& view : sample.processes) {
    if (!view.visible) {
      line(fmt::format("{:>8} {:<10} {:>10} {:<18} {:>10}  {:>10} {:<18} {:>8} {:1}  {:<36} {}",
                       view.pid, "?",
                       view.gpu_memory_bytes ? format_bytes(*view.gpu_memory_bytes) : "?",
                       trend_text(view.gpu_trend), until_full_text(view.gpu_trend), "-", "", "",
                       "?", "not in this PID namespace", "(another container or the host)"));
      continue;
    }
    std::string relation = view.relation.text;
    if (view.orphan.orphaned) {
      relation = relation.empty() ? "ORPHAN (parent exited)" : "ORPHAN, " + relation;
    } else if (view.info.is_zombie()) {
      relation = relation.empty() ? "ZOMBIE (not reaped)" : "ZOMBIE, " + relation;
    }
    if (!view.info.container_id.empty()) {
      relation += (relation.empty() ? "" : ", ") + std::string("container ") +
                  short_container_id(view.info.container_id);
    }
    std::string gpu_memory = view.gpu_memory_bytes ? format_bytes(*view.gpu_memory_bytes)
                             : view.info.device_handle_count > 0 ? "handle"
                                                                 : "-";
    line(fmt::format(
        "{:>8} {:<10} {:>10} {:<18} {:>10}  {:>10} {:<18} {:>8} {:1}  {:<36} {}", view.pid,
        view.user.substr(0, 10), gpu_memory,
        view.gpu_memory_bytes ? trend_text(view.gpu_trend) : "", until_full_text(view.gpu_trend),
        format_bytes(view.info.rss_bytes), view.info.is_zombie() ? "" : trend_text(view.rss_trend),
        until_full_text(view.rss_trend), view.info.state, relation, view.info.command_line()));
  }
  for (const auto& note : sample.notes) line("note: " + note);
  return out;
}

}  // namespace gpuleak::monitor
