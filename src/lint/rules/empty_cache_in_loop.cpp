// GL502: torch.cuda.empty_cache() on every training step.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL502",
    "empty-cache-in-loop",
    Severity::kWarning,
    Cause::kIneffectiveFix,
    "torch.cuda.empty_cache() is called on every step of a training or evaluation loop.",
    "`empty_cache()` only hands cached blocks that no tensor uses back to the driver. It cannot "
    "free a leaked tensor (a tensor that is still referenced stays allocated, and "
    "`torch.cuda.memory_allocated()` does not change), so it fixes no leak and hides none. Each "
    "call releases memory with cudaFree, which synchronizes the device, and the next steps must "
    "allocate it again with cudaMalloc: called every step, it only slows training down.",
    "Remove it from the loop and find what keeps the memory (`gpuleak run`, the other lint "
    "findings). If fragmentation is the problem, try "
    "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`. One call between phases (after "
    "training, before evaluation) to return memory to other processes is fine.",
};

// Runs every time the enclosing loop body (or function body) does: no if,
// else or except between them, except conditions that only ask whether CUDA
// is there at all.
bool runs_every_time(const FileAnalysis& file, NodeId call, NodeId body) {
  return !file.runs_conditionally_within(call, body, [&file](NodeId condition) {
    std::string_view text = condition != kNoNode ? file.text(condition) : std::string_view();
    return text.find("cuda") != std::string_view::npos ||
           text.find("is_available") != std::string_view::npos;
  });
}

void check(const FileAnalysis& file, FindingSink& sink) {
  for (NodeId call : file.calls()) {
    if (file.qualified_name(file.callee(call)) != "torch.cuda.empty_cache") continue;
    NodeId loop = file.innermost_loop(call);
    RuleReport r;
    r.node = call;
    if (loop != kNoNode) {
      if (!runs_every_time(file, call, file.loop_body(loop))) continue;
      if (!loop_runs_a_step(file, loop) && !iterates_over_batches(file, loop)) continue;
      r.message = fmt::format(
          "`{}` runs on every iteration of this loop: it frees no leaked tensor and slows every "
          "step",
          quote(file, call));
    } else {
      const Scope& scope = file.scope_of(call);
      if (!is_per_step_function(scope) || scope.body == kNoNode) continue;
      if (!runs_every_time(file, call, scope.body)) continue;
      r.message = fmt::format(
          "`{}` runs in `{}`, once per batch: it frees no leaked tensor and slows every step",
          quote(file, call), scope.name);
    }
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_empty_cache_in_loop_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
