#include "report/exports.h"

#include <algorithm>
#include <array>
#include <set>

#include "report/exports/writers.h"

namespace gpuleak::report {

namespace {

constexpr std::array<std::pair<ExportFormat, const char*>, 6> kFormats{{
    {ExportFormat::kMemoryViz, "memory_viz"},
    {ExportFormat::kPerfetto, "perfetto"},
    {ExportFormat::kSpeedscope, "speedscope"},
    {ExportFormat::kFolded, "folded"},
    {ExportFormat::kPprof, "pprof"},
    {ExportFormat::kCsv, "csv"},
}};

constexpr std::array<std::pair<FlameView, const char*>, 3> kViews{{
    {FlameView::kGrowthPerStep, "growth-per-step"},
    {FlameView::kLiveAtExit, "live-at-exit"},
    {FlameView::kLiveAtPeak, "live-at-peak"},
}};

// Sites followed when nothing grows: the largest live at the end, so a
// clean run's CSV and counters still show where its memory is.
constexpr std::size_t kLiveSitesWhenFlat = 16;

}  // namespace

const char* export_format_name(ExportFormat format) {
  for (const auto& [f, name] : kFormats) {
    if (f == format) return name;
  }
  return "?";
}

std::optional<ExportFormat> parse_export_format(const std::string& name) {
  for (const auto& [f, n] : kFormats) {
    if (name == n) return f;
  }
  return std::nullopt;
}

std::string export_format_names() {
  std::string out;
  for (const auto& [f, name] : kFormats) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

const char* flame_view_name(FlameView view) {
  for (const auto& [v, name] : kViews) {
    if (v == view) return name;
  }
  return "?";
}

std::optional<FlameView> parse_flame_view(const std::string& name) {
  for (const auto& [v, n] : kViews) {
    if (name == n) return v;
  }
  return std::nullopt;
}

bool holds_several_processes(ExportFormat format) { return format != ExportFormat::kMemoryViz; }

analysis::ExportRequest export_request(ExportFormat format, const analysis::ProcessReport& first) {
  analysis::ExportRequest request;
  std::set<std::uint32_t> chosen;
  auto follow = [&](std::uint32_t id) {
    if (request.series_site_ids.size() < analysis::kMaxSeriesSites && chosen.insert(id).second) {
      request.series_site_ids.push_back(id);
    }
  };
  for (const analysis::SiteGrowth& s : first.growth.sites) {
    if (s.site_id != analysis::kPoolSiteId) follow(s.site_id);
  }
  if (request.series_site_ids.empty()) {
    for (const analysis::LeakGroup& g : first.leaks.groups) {
      if (request.series_site_ids.size() >= kLiveSitesWhenFlat) break;
      if (!g.stack_ids.empty()) follow(g.stack_ids.back());
    }
  }
  request.peak_bytes = first.peak_live_bytes;
  switch (format) {
    case ExportFormat::kMemoryViz:
      // PyTorch's own history keeps 100,000 entries by default; so do we.
      request.max_events = 100000;
      request.max_live_blocks = 200000;
      break;
    case ExportFormat::kPerfetto:
      // Each event is a slice in the viewer: a few ten thousand stay usable.
      request.max_events = 20000;
      break;
    default:
      break;
  }
  return request;
}

void write_export(ExportFormat format, const std::vector<const analysis::ProcessReport*>& processes,
                  const ExportOptions& options, std::ostream& out) {
  switch (format) {
    case ExportFormat::kMemoryViz:
      if (!processes.empty()) write_memory_viz(*processes.front(), options, out);
      return;
    case ExportFormat::kPerfetto:
      write_perfetto(processes, options, out);
      return;
    case ExportFormat::kSpeedscope:
      write_speedscope(processes, options, out);
      return;
    case ExportFormat::kFolded:
      write_folded(processes, options, out);
      return;
    case ExportFormat::kPprof:
      write_pprof(processes, options, out);
      return;
    case ExportFormat::kCsv:
      write_csv(processes, options, out);
      return;
  }
}

}  // namespace gpuleak::report
