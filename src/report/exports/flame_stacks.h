// The weighted stacks every flame graph of a report is drawn from
// (speedscope, folded stacks, pprof, the HTML report's flame graph): one
// stack per site, root first, weighed by the view's bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model/report_model.h"
#include "report/exports.h"

namespace gpuleak::report {

struct FlameFrame {
  std::string name;  // "train_step (train.py:42)", "cudaMalloc (libcudart.so.13)"
  std::string file;
  std::uint32_t line = 0;
  bool python = false;
  bool operator==(const FlameFrame&) const = default;
};

struct FlameStack {
  std::vector<FlameFrame> frames;  // root first, the allocating frame last
  std::uint64_t bytes = 0;         // the view's weight (bytes, or bytes per step rounded)
  std::uint64_t allocations = 0;   // live allocations of the site (0 for growth)
};

// The frames of a stack as a flame graph shows them: root first, ending at
// the report's site (the frame it blames; the allocator's frames inside it
// are the same for every site), with the report's default folding
// (analysis::folded_by_default); `all_frames` keeps every frame. The API
// is the leaf when no frame was captured.
std::vector<FlameFrame> flame_frames(const std::vector<analysis::Frame>& frames,
                                     const analysis::Site& site, const std::string& api,
                                     bool all_frames);

// The stacks of one process in one view; empty when the view has nothing
// (no growing site, no export detail for the peak).
std::vector<FlameStack> flame_stacks(const analysis::ProcessReport& process, FlameView view,
                                     bool all_frames);

// "pid 1234 python train.py" (the command line cut to 60 characters).
std::string process_title(const analysis::ProcessReport& process);

}  // namespace gpuleak::report
