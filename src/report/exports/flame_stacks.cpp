#include "report/exports/flame_stacks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/file_names.h"

namespace gpuleak::report {

using analysis::Frame;

namespace {

FlameFrame flame_frame(const Frame& f) {
  FlameFrame out;
  out.file = f.file;
  out.line = f.line;
  out.python = f.language == Frame::Language::kPython;
  std::string function = f.function.empty() ? fmt::format("0x{:x}", f.address) : f.function;
  if (!f.file.empty()) {
    out.name = f.line > 0 ? fmt::format("{} ({}:{})", function, base_name(f.file), f.line)
                          : fmt::format("{} ({})", function, base_name(f.file));
  } else if (!f.module.empty()) {
    out.name = fmt::format("{} ({})", function, base_name(f.module));
  } else {
    out.name = function;
  }
  return out;
}

std::vector<FlameStack> stacks_of_groups(const std::vector<analysis::LeakGroup>& groups,
                                         bool all_frames) {
  std::vector<FlameStack> out;
  for (const analysis::LeakGroup& g : groups) {
    // A cache's segments hold the tensors drawn on their own: drawn too,
    // the same bytes would count twice.
    if (g.pool_segment) continue;
    out.push_back({flame_frames(g.frames, g.site, g.api, all_frames), g.bytes, g.allocations});
  }
  return out;
}

}  // namespace

std::vector<FlameFrame> flame_frames(const std::vector<Frame>& frames, const analysis::Site& site,
                                     const std::string& api, bool all_frames) {
  bool user = analysis::has_user_frame(frames);
  // Frames are innermost first; the site's frame and those outside it are
  // drawn (a stack whose site is no frame of it is drawn whole).
  auto stop = frames.rend();  // reading from the root: the first frame inside the site
  if (!all_frames) {
    for (auto it = frames.begin(); it != frames.end(); ++it) {
      if (it->function == site.function && it->file == site.file && it->line == site.line &&
          !site.function.empty()) {
        stop = std::make_reverse_iterator(it);
        break;
      }
    }
  }
  std::vector<FlameFrame> out;
  for (auto it = frames.rbegin(); it != stop; ++it) {
    if (it->plumbing || (!all_frames && analysis::folded_by_default(*it, user))) continue;
    out.push_back(flame_frame(*it));
  }
  if (out.empty() && !site.function.empty()) {
    // No frames, but the report names a place (a framework pool's growth is
    // placed at the loop that grows it): that place is the stack.
    Frame f;
    f.function = site.function;
    f.file = site.file;
    f.line = site.line;
    out.push_back(flame_frame(f));
  }
  if (out.empty()) out.push_back({api.empty() ? "(no stack)" : api + " (no stack)", "", 0, false});
  return out;
}

std::vector<FlameStack> flame_stacks(const analysis::ProcessReport& process, FlameView view,
                                     bool all_frames) {
  switch (view) {
    case FlameView::kGrowthPerStep: {
      std::vector<FlameStack> out;
      for (const analysis::SiteGrowth& s : process.growth.sites) {
        if (s.rate_bytes_per_step <= 0) continue;
        auto bytes = static_cast<std::uint64_t>(std::llround(s.rate_bytes_per_step));
        if (bytes == 0) bytes = 1;  // a site that grows is never drawn as nothing
        out.push_back({flame_frames(s.frames, s.site, "", all_frames), bytes, 0});
      }
      return out;
    }
    case FlameView::kLiveAtExit: {
      std::vector<FlameStack> out = stacks_of_groups(process.leaks.groups, all_frames);
      std::vector<FlameStack> kept = stacks_of_groups(process.leaks.suppressed_groups, all_frames);
      out.insert(out.end(), kept.begin(), kept.end());
      return out;
    }
    case FlameView::kLiveAtPeak:
      if (!process.export_detail) return {};
      return stacks_of_groups(process.export_detail->live_at_peak, all_frames);
  }
  return {};
}

std::string process_title(const analysis::ProcessReport& process) {
  std::string command = process.process.command_line;
  if (command.size() > 60) command = command.substr(0, 57) + "...";
  return command.empty() ? fmt::format("pid {}", process.process.pid)
                         : fmt::format("pid {} {}", process.process.pid, command);
}

}  // namespace gpuleak::report
