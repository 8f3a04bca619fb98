#include "report/html_page_data.h"

#include <map>
#include <memory>

#include "report/exports/flame_stacks.h"

namespace gpuleak::report {

using nlohmann::json;

namespace {

// A flame graph tree, children kept in order of first appearance.
struct Node {
  std::string name;
  std::uint64_t bytes = 0;
  std::vector<std::unique_ptr<Node>> children;
  std::map<std::string, Node*> by_name;
  Node* child(const std::string& child_name) {
    auto it = by_name.find(child_name);
    if (it != by_name.end()) return it->second;
    children.push_back(std::make_unique<Node>());
    children.back()->name = child_name;
    by_name[child_name] = children.back().get();
    return children.back().get();
  }
};

json to_json(const Node& node) {
  json children = json::array();
  for (const auto& c : node.children) children.push_back(to_json(*c));
  return {{"name", node.name}, {"value", node.bytes}, {"children", std::move(children)}};
}

json flame_tree(const analysis::ProcessReport& process, FlameView view) {
  std::vector<FlameStack> stacks = flame_stacks(process, view, /*all_frames=*/false);
  if (stacks.empty()) return nullptr;
  Node root;
  root.name = "all";
  for (const FlameStack& s : stacks) {
    Node* at = &root;
    root.bytes += s.bytes;
    for (const FlameFrame& f : s.frames) {
      at = at->child(f.name);
      at->bytes += s.bytes;
    }
  }
  return to_json(root);
}

json site_series(const analysis::ProcessReport& process) {
  if (!process.export_detail || process.timeline.site_live_bytes.empty()) return nullptr;
  const analysis::ExportDetail& d = *process.export_detail;
  std::map<std::uint32_t, bool> growing;
  for (const analysis::SiteGrowth& s : process.growth.sites) growing[s.site_id] = true;
  json sites = json::array();
  for (std::uint32_t id : d.series_site_ids) {
    auto site = d.sites.find(id);
    const analysis::Site empty;
    const analysis::Site& s = site != d.sites.end() ? site->second : empty;
    sites.push_back({{"site_id", id},
                     {"label", s.label()},
                     {"function", s.function},
                     {"file", s.file},
                     {"growing", growing.count(id) > 0}});
  }
  return {{"sites", std::move(sites)}, {"live_bytes", process.timeline.site_live_bytes}};
}

json driver_memory(const analysis::ProcessReport& process) {
  const auto& points = process.cuda_use.memory;
  if (points.empty()) return nullptr;
  json time_s = json::array(), tensors = json::array(), driver = json::array();
  for (const analysis::DriverMemoryPoint& p : points) {
    time_s.push_back(p.time_s);
    tensors.push_back(p.tensor_bytes);
    driver.push_back(p.driver_bytes);
  }
  return {{"time_s", std::move(time_s)},
          {"tensor_bytes", std::move(tensors)},
          {"driver_bytes", std::move(driver)}};
}

}  // namespace

analysis::ExportRequest html_page_request(const analysis::ProcessReport& first) {
  // The speedscope export asks for the same: series and the peak, no events.
  return export_request(ExportFormat::kSpeedscope, first);
}

json html_page_data(const analysis::ProcessReport& process) {
  json flame = json::object();
  for (FlameView view :
       {FlameView::kGrowthPerStep, FlameView::kLiveAtExit, FlameView::kLiveAtPeak}) {
    flame[flame_view_name(view)] = flame_tree(process, view);
  }
  return {{"flame", std::move(flame)},
          {"site_series", site_series(process)},
          {"driver_memory", driver_memory(process)}};
}

}  // namespace gpuleak::report
