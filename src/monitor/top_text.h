// The people's view of a monitor sample for `gpuleak top`: a header line,
// one line per GPU, and a table of processes with GPU memory and host RSS
// side by side, each with its trend, the leak flag and the time until full.
// It returns plain text; whether it redraws in place (a terminal) or
// scrolls (a pipe) is the caller's business.
//
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "monitor/sample.h"

namespace gpuleak::monitor {

struct TopTextOptions {
  double interval_s = 1.0;
  double window_s = 300;
  std::size_t max_width = 0;  // cut lines to this many columns; 0 keeps them whole
};

// What the interactive `top` shows of the process table: the order, a
// filter on the command line, the tree, and the selected row. The default
// keeps the sample's order (most GPU memory first) and every process.
enum class TopSort { kMemory, kTrend, kPid };

struct TopView {
  TopSort sort = TopSort::kMemory;  // kTrend: fastest GPU growth first, then host RSS growth
  std::string filter;               // keep processes whose command line contains this; "" keeps all
  bool tree = false;                // children under their parent, the command indented
  int selected_pid = 0;             // marked with '>' in the first column; 0 marks nothing
};

struct TopRow {
  const ProcessView* process = nullptr;
  int depth = 0;  // in the tree: 0 for a process whose parent is not shown
};

const char* top_sort_name(TopSort sort);  // "memory", "trend", "pid"
TopSort next_top_sort(TopSort sort);

// The processes of `sample` as `view` shows them, in order. Points into `sample`.
std::vector<TopRow> arrange_top_rows(const Sample& sample, const TopView& view);

// Without `view` the text is the plain stream's (every process, the sample's order).
std::string render_top_text(const Sample& sample, const TopTextOptions& options,
                            const TopView* view = nullptr);

}  // namespace gpuleak::monitor
