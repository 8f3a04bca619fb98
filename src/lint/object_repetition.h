// Whether the code of a function runs more than once, and whether each run
// makes a new object that the next run drops: what turns something kept per
// object (a hook on a layer, a reference cycle) into growth.
#pragma once

#include <string>
#include <vector>

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

// The class at `class_node` first, then the classes of the file derived
// from it at any depth (by base name), at most about 16: the classes whose
// objects run its code (its __init__ through super().__init__(), its
// methods). Empty when `class_node` is no class of the file.
std::vector<const ClassFacts*> class_and_subclasses(const FileAnalysis& file, NodeId class_node);

// The result of `call` is bound to a plain name or an attribute, not kept at
// all, or has a method called on it: the next run replaces it.
bool result_replaced(const SyntaxTree& tree, NodeId call);

}  // namespace gpuleak::lint
