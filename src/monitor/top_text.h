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

#include "monitor/sample.h"

namespace gpuleak::monitor {

struct TopTextOptions {
  double interval_s = 1.0;
  double window_s = 300;
  std::size_t max_width = 0;  // cut lines to this many columns; 0 keeps them whole
};

std::string render_top_text(const Sample& sample, const TopTextOptions& options);

}  // namespace gpuleak::monitor
