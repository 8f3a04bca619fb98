#include "analysis/leak_cause.h"

#include <algorithm>

#include "gpuleak/vocabulary.h"

namespace gpuleak::analysis {

using vocabulary::Cause;
using vocabulary::cause_slug;

namespace {

// Many tensor sites that grow by about the same count per step are the
// saved activations of one kept autograd graph.
bool many_sites_grow_together(const std::vector<SiteGrowth>& leaking) {
  std::size_t tensor_sites = std::count_if(leaking.begin(), leaking.end(),
                                           [](const SiteGrowth& s) { return s.tensor_level; });
  if (tensor_sites < 3) return false;
  double low = 1e300, high = 0;
  for (const SiteGrowth& s : leaking) {
    if (!s.tensor_level) continue;
    low = std::min(low, s.allocations_per_step);
    high = std::max(high, s.allocations_per_step);
  }
  return low >= 0.5 && high <= 3 * low;
}

}  // namespace

LeakCause leak_cause(const std::vector<SiteGrowth>& leaking, const HolderFinding* top_holder) {
  const SiteGrowth& top = leaking.front();
  LeakCause c;
  if (top_holder && top_holder->kind == "graph") {
    c.cause = cause_slug(Cause::kAutogradGraphKeptAlive);
  } else if (top_holder && top_holder->kind == "tensor") {
    c.cause = cause_slug(Cause::kTensorsKeptAlive);
  } else if (!top.tensor_level) {
    c.cause = cause_slug(Cause::kNonTensorDriverAllocations);
  } else if (many_sites_grow_together(leaking)) {
    c.cause = cause_slug(Cause::kAutogradGraphKeptAlive);
  } else {
    c.cause = cause_slug(Cause::kTensorsKeptAlive);
  }
  if (c.cause == cause_slug(Cause::kAutogradGraphKeptAlive)) {
    c.text =
        "an autograd graph is kept alive: a tensor that still has grad_fn is stored across "
        "steps, "
        "so every activation saved for its backward pass stays in memory";
    c.fix =
        "keep loss.item() or .detach() instead of the tensor, and run evaluation under "
        "torch.no_grad()";
  } else if (c.cause == cause_slug(Cause::kTensorsKeptAlive)) {
    c.text =
        "tensors are kept alive by a Python reference (a list, dict, attribute, global, cache, "
        "exception or hook) that grows every step";
    c.fix =
        "stop keeping the tensors (bound the container, store .item() or .cpu() copies, or clear "
        "it each step)";
  } else {
    c.text =
        "memory handed out by the CUDA driver outside PyTorch's allocator (an extension or "
        "library "
        "calling cudaMalloc) is never freed";
    c.fix = "free the buffers allocated at the frames shown, or reuse one buffer";
  }
  if (top_holder && !top_holder->fix.empty()) c.fix = top_holder->fix;
  return c;
}

}  // namespace gpuleak::analysis
