// Whether a store makes its container grow step after step, or only
// overwrites what the previous step put there.
//
// A store grows the container when the container outlives the iteration
// that stores into it: it is not reassigned (or cleared) unconditionally in
// the loop body, or, outside any loop, it is an attribute, global or closure
// variable of a function that runs once per step (a method, a hook). A
// subscript store grows only when its key changes every step (`cache[step]`),
// not when it overwrites one slot (`features["fc"]`).
#pragma once

#include <string>

#include "file_analysis.h"

namespace gpuleak::lint {

// kPerSize: a cache keyed by an input size gains an entry for every new
// size it sees (batch sizes, sequence lengths), whatever the call rate.
enum class Growth { kBounded, kPerIteration, kPerCall, kPerSize };

struct GrowthVerdict {
  Growth growth = Growth::kBounded;
  NodeId loop = kNoNode;     // the innermost loop it grows across (kPerIteration)
  int loops_outlived = 0;    // how many nested loops the container survives
  std::string container;     // "losses", "self.cache"
  bool local = true;         // a plain local of the storing scope
  bool into_tensor = false;  // a slot write into a tensor (the value carries a graph)
};

GrowthVerdict store_growth(const FileAnalysis& file, const StoreEvent& store);

// True when `site` runs under an `if` on a flag that the file switches off
// (`self._record = False` somewhere): it records for a while, then stops.
bool guarded_by_flag_turned_off(const FileAnalysis& file, NodeId site);

// The name a container expression is reached through: `metrics["loss"]` ->
// "metrics", `d.setdefault(k, [])` -> "d", `self.buf` -> "self.buf".
std::string container_path(const FileAnalysis& file, NodeId container);

// True for keys that change every step: `step`, `batch_idx`, `len(cache)`,
// `self.global_step`, `time.time()`.
bool key_varies_per_step(const FileAnalysis& file, NodeId key);
// True for keys built from input sizes: `x.shape`, `batch_size`,
// `(num_requests, max_tokens)` (one assignment away).
bool key_varies_with_sizes(const FileAnalysis& file, NodeId key);

// Where an emptying must run to bound a container: anywhere (tensors without
// a graph: an epoch-end reset bounds them to one epoch), or every step
// (graphs: each kept graph holds its step's activations until the reset).
enum class EmptiedWhen { kAnywhere, kEveryStep };

// True when the file bounds or empties the container somewhere: `.clear()`,
// `.pop()`, `del c[...]`, `deque(maxlen=...)`, or rebinding it outside
// `__init__`. Size bounds (maxlen, slicing, weak references) count whatever
// `when` says; emptyings count only where `when` allows.
bool container_bounded_elsewhere(const FileAnalysis& file, const std::string& path,
                                 EmptiedWhen when = EmptiedWhen::kAnywhere);

// `total += loss` / `c = c + v` of a value with an autograd graph: each
// addition links the new graph to the previous ones.
bool is_graph_sum(const FileAnalysis& file, const StoreEvent& store);

// True when the running sum `path` is restarted (rebound afresh, or
// detached) inside a loop or in a function that runs once per step. A reset
// method called per epoch (an AverageMeter's `reset()`) does not bound a sum
// of graphs: every step's graph stays until the epoch ends.
bool sum_restarted_every_step(const FileAnalysis& file, const std::string& path);

}  // namespace gpuleak::lint
