// Why a phase's memory leaks, judged from the sites found growing in it and
// what the Python package found holding the fastest one: the cause id users
// read (gpuleak/vocabulary.h), the sentence that explains it, and the fix.
// Worded for the process: a library handle made and never destroyed is named
// by its creating call wherever it happens; a process that runs no Python
// gets the CUDA calls that allocate and free, never Python advice.
//
// Pure function, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "analysis/growth/holder_findings.h"
#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

struct LeakCause {
  std::string cause;  // vocabulary::cause_slug(...)
  std::string text;   // the mechanism, in words
  std::string fix;    // the holder's own fix when it names one
};

// `leaking`: the growing sites not known to be bounded, fastest first (not
// empty). `top_holder`: the finding for leaking.front(), or null.
// `runs_python`: the process ran Python code (ProcessAnalysis::runs_python).
// A holder that names a graph or a tensor decides; without one, a library
// call that makes handles on the top site's stack names the leak, then a
// process without Python leaks device buffers it allocated itself, then a
// driver allocation outside the tensor allocator is its own cause, and three
// or more tensor sites growing by about the same count per step are one
// autograd graph.
LeakCause leak_cause(const std::vector<SiteGrowth>& leaking, const HolderFinding* top_holder,
                     bool runs_python);

}  // namespace gpuleak::analysis
