// Whether the code of a function runs more than once, and whether each run
// makes a new object that the next run drops: what turns something kept per
// object (a hook on a layer, a reference cycle) into growth.
#pragma once

#include <string>

#include "lint/file_analysis.h"

namespace gpuleak::lint {

// Why the code of a function runs more than once, as a finding tells it.
struct Repetition {
  bool repeated = false;
  // A new object is made on each of those runs and dropped at the next
  // (`cam = GradCAM(...)` in a loop), not collected (`[Block() for ...]`).
  bool object_per_iteration = false;
  std::string runner;  // the function (or class) whose call repeats
  std::string why;     // "`GradCAM(...)` in the loop at line 262"
};

// The code of `scope` runs again: it is a per-step function, or it is called
// (for an __init__: its class or a subclass of the file is built) in a loop
// or a comprehension, at module level too, or from a function that itself
// runs again (up to three calls away).
Repetition runs_again(const FileAnalysis& file, std::size_t scope, int depth = 0);

// The result of `call` is bound to a plain name or an attribute, not kept at
// all, or has a method called on it: the next run replaces it.
bool result_replaced(const SyntaxTree& tree, NodeId call);

}  // namespace gpuleak::lint
