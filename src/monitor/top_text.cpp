#include "monitor/top_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <map>

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

std::string process_line(const ProcessView& view, int depth) {
  if (!view.visible) {
    return fmt::format("{:>8} {:<10} {:>10} {:<18} {:>10}  {:>10} {:<18} {:>8} {:1}  {:<36} {}",
                       view.pid, "?",
                       view.gpu_memory_bytes ? format_bytes(*view.gpu_memory_bytes) : "?",
                       trend_text(view.gpu_trend), until_full_text(view.gpu_trend), "-", "", "",
                       "?", "not in this PID namespace", "(another container or the host)");
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
  std::string command = view.info.command_line();
  if (depth > 0)
    command = std::string(static_cast<std::size_t>(depth - 1) * 3, ' ') + "`- " + command;
  std::string gpu_memory = view.gpu_memory_bytes ? format_bytes(*view.gpu_memory_bytes)
                           : view.info.device_handle_count > 0 ? "handle"
                                                               : "-";
  return fmt::format("{:>8} {:<10} {:>10} {:<18} {:>10}  {:>10} {:<18} {:>8} {:1}  {:<36} {}",
                     view.pid, view.user.substr(0, 10), gpu_memory,
                     view.gpu_memory_bytes ? trend_text(view.gpu_trend) : "",
                     until_full_text(view.gpu_trend), format_bytes(view.info.rss_bytes),
                     view.info.is_zombie() ? "" : trend_text(view.rss_trend),
                     until_full_text(view.rss_trend), view.info.state, relation, command);
}

double growth_bytes_per_s(const ProcessView& view) {
  return view.gpu_memory_bytes && view.gpu_trend.points >= kMinPointsForSlope
             ? view.gpu_trend.slope_bytes_per_s
             : 0.0;
}

double rss_growth_bytes_per_s(const ProcessView& view) {
  return view.rss_trend.points >= kMinPointsForSlope ? view.rss_trend.slope_bytes_per_s : 0.0;
}

}  // namespace

const char* top_sort_name(TopSort sort) {
  switch (sort) {
    case TopSort::kMemory:
      return "memory";
    case TopSort::kTrend:
      return "trend";
    case TopSort::kPid:
      return "pid";
  }
  return "memory";
}

TopSort next_top_sort(TopSort sort) {
  switch (sort) {
    case TopSort::kMemory:
      return TopSort::kTrend;
    case TopSort::kTrend:
      return TopSort::kPid;
    case TopSort::kPid:
      return TopSort::kMemory;
  }
  return TopSort::kMemory;
}

std::vector<TopRow> arrange_top_rows(const Sample& sample, const TopView& view) {
  std::vector<const ProcessView*> shown;
  for (const auto& process : sample.processes) {
    if (!view.filter.empty() &&
        process.info.command_line().find(view.filter) == std::string::npos) {
      continue;
    }
    shown.push_back(&process);
  }
  if (view.sort == TopSort::kTrend) {
    std::stable_sort(shown.begin(), shown.end(), [](const ProcessView* a, const ProcessView* b) {
      if (growth_bytes_per_s(*a) != growth_bytes_per_s(*b))
        return growth_bytes_per_s(*a) > growth_bytes_per_s(*b);
      return rss_growth_bytes_per_s(*a) > rss_growth_bytes_per_s(*b);
    });
  } else if (view.sort == TopSort::kPid) {
    std::stable_sort(shown.begin(), shown.end(),
                     [](const ProcessView* a, const ProcessView* b) { return a->pid < b->pid; });
  }
  std::vector<TopRow> rows;
  if (!view.tree) {
    for (const ProcessView* process : shown) rows.push_back({process, 0});
    return rows;
  }
  // Children under their parent, in the chosen order among siblings.
  std::map<int, const ProcessView*> by_pid;
  for (const ProcessView* process : shown) by_pid[process->pid] = process;
  std::map<int, std::vector<const ProcessView*>> children;
  std::vector<const ProcessView*> roots;
  for (const ProcessView* process : shown) {
    int parent = process->visible ? process->info.ppid : 0;
    if (parent != process->pid && by_pid.count(parent) > 0) {
      children[parent].push_back(process);
    } else {
      roots.push_back(process);
    }
  }
  std::function<void(const ProcessView*, int)> visit = [&](const ProcessView* process, int depth) {
    rows.push_back({process, depth});
    auto found = children.find(process->pid);
    if (found == children.end()) return;
    std::vector<const ProcessView*> kids = std::move(found->second);
    children.erase(found);  // a pid cycle cannot loop
    for (const ProcessView* kid : kids) visit(kid, depth + 1);
  };
  for (const ProcessView* root : roots) visit(root, 0);
  return rows;
}

std::string render_top_text(const Sample& sample, const TopTextOptions& options,
                            const TopView* view_options) {
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
  const std::vector<TopRow> rows =
      view_options ? arrange_top_rows(sample, *view_options) : arrange_top_rows(sample, TopView{});
  if (!sample.processes.empty() && rows.empty()) {
    line(fmt::format("{:>8} no process matches the filter \"{}\"", "-", view_options->filter));
  }
  for (const TopRow& row : rows) {
    const ProcessView& view = *row.process;
    std::string text = process_line(view, row.depth);
    if (view_options && view.pid == view_options->selected_pid && !text.empty()) text[0] = '>';
    line(text);
  }
  for (const auto& note : sample.notes) line("note: " + note);
  return out;
}

}  // namespace gpuleak::monitor
