// The speedscope and folded-stacks exports: flame graphs of what each
// process kept (report/exports/flame_stacks.h).
//
// speedscope (www.speedscope.app, its file format's JSON schema): one
// "sampled" profile per process and view, weighed in bytes; each site is a
// sample whose stack runs from the root to the allocating frame. Folded
// stacks (Brendan Gregg's flamegraph.pl input, read by speedscope, inferno
// and most flame graph tools): one line per site, `root;...;leaf bytes`,
// for the one view asked for, each process under a root frame of its own
// when there are several.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "report/exports/flame_stacks.h"
#include "report/exports/writers.h"

namespace gpuleak::report {

using nlohmann::json;

namespace {

const char* view_title(FlameView view) {
  switch (view) {
    case FlameView::kGrowthPerStep:
      return "growth per step (bytes per step)";
    case FlameView::kLiveAtExit:
      return "live at exit (bytes)";
    case FlameView::kLiveAtPeak:
      return "live at the peak (bytes)";
  }
  return "?";
}

// A folded line is split at ';' and at its last space: a frame's name keeps
// neither a ';' nor a line break.
std::string folded_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (c == ';') c = ',';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

}  // namespace

void write_speedscope(const ProcessList& processes, const ExportOptions& options,
                      std::ostream& out) {
  json frames = json::array();
  std::map<std::string, std::size_t> frame_index;  // name + file + line -> index
  auto index_of = [&](const FlameFrame& f) {
    std::string key = f.name + '\n' + f.file + '\n' + std::to_string(f.line);
    auto [it, inserted] = frame_index.try_emplace(key, frames.size());
    if (inserted) {
      json frame = {{"name", f.name}};
      if (!f.file.empty()) frame["file"] = f.file;
      if (f.line > 0) frame["line"] = f.line;
      frames.push_back(std::move(frame));
    }
    return it->second;
  };
  json profiles = json::array();
  json left_out = json::array();
  for (const analysis::ProcessReport* p : processes) {
    for (FlameView view :
         {FlameView::kGrowthPerStep, FlameView::kLiveAtExit, FlameView::kLiveAtPeak}) {
      std::vector<FlameStack> stacks = flame_stacks(*p, view, options.all_frames);
      if (stacks.empty()) {
        left_out.push_back(
            fmt::format("{}: {}: nothing to draw", process_title(*p), view_title(view)));
        continue;
      }
      json samples = json::array();
      json weights = json::array();
      std::uint64_t total = 0;
      for (const FlameStack& s : stacks) {
        json sample = json::array();
        for (const FlameFrame& f : s.frames) sample.push_back(index_of(f));
        samples.push_back(std::move(sample));
        weights.push_back(s.bytes);
        total += s.bytes;
      }
      profiles.push_back({{"type", "sampled"},
                          {"name", fmt::format("{}: {}", process_title(*p), view_title(view))},
                          {"unit", "bytes"},
                          {"startValue", 0},
                          {"endValue", total},
                          {"samples", std::move(samples)},
                          {"weights", std::move(weights)}});
    }
  }
  std::string name = processes.size() == 1 ? "gpuleak: " + process_title(*processes.front())
                                           : fmt::format("gpuleak: {} processes", processes.size());
  if (!left_out.empty()) name += fmt::format(" ({} empty views left out)", left_out.size());
  json doc = {{"$schema", "https://www.speedscope.app/file-format-schema.json"},
              {"name", name},
              {"exporter", options.producer},
              {"activeProfileIndex", 0},
              {"shared", {{"frames", std::move(frames)}}},
              {"profiles", std::move(profiles)}};
  out << doc.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

void write_folded(const ProcessList& processes, const ExportOptions& options, std::ostream& out) {
  bool several = processes.size() > 1;
  for (const analysis::ProcessReport* p : processes) {
    for (const FlameStack& s : flame_stacks(*p, options.view, options.all_frames)) {
      std::string line = several ? folded_name(process_title(*p)) : "";
      for (const FlameFrame& f : s.frames) {
        if (!line.empty()) line += ';';
        line += folded_name(f.name);
      }
      out << line << ' ' << s.bytes << '\n';
    }
  }
}

}  // namespace gpuleak::report
