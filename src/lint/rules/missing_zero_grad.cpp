// GL503: backward() and optimizer.step() every iteration, gradients never
// cleared. A correctness bug, reported because it is often mistaken for a
// leak (and "fixed" as one).
#include <fmt/format.h>

#include <algorithm>

#include "lint/rules/rule_factories.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL503",
    "missing-zero-grad",
    Severity::kWarning,
    Cause::kCorrectness,
    "A loop calls backward() and optimizer.step() but never clears the gradients.",
    "`backward()` adds into each parameter's `.grad`. Without `optimizer.zero_grad()` (or "
    "`model.zero_grad()`) in the loop, every `step()` applies the sum of all gradients since the "
    "start, so updates grow and training goes wrong. This is a correctness bug, not a memory "
    "leak: `.grad` buffers are allocated once and keep their size.",
    "Call `optimizer.zero_grad(set_to_none=True)` once per step, before `backward()` (with "
    "gradient accumulation, right after each `optimizer.step()`).",
};

// `with dist_autograd.context() as context_id:` around the step: distributed
// autograd keeps that iteration's gradients in the context, which ends with
// the block, and DistributedOptimizer.step(context_id) applies them; there
// is nothing to clear.
bool in_distributed_autograd_context(const FileAnalysis& file, NodeId step) {
  const SyntaxTree& tree = file.tree();
  for (NodeId p = tree.parent(step); p != kNoNode; p = tree.parent(p)) {
    if (tree.kind(p) != NodeKind::kWithStatement) continue;
    for (NodeId clause : tree.named_children(p)) {
      if (tree.kind(clause) != NodeKind::kWithClause) continue;
      for (NodeId item : tree.named_children(clause)) {
        NodeId value = tree.kind(item) == NodeKind::kWithItem
                           ? tree.child_by_field(item, Field::kValue)
                           : kNoNode;
        if (value != kNoNode && tree.kind(value) == NodeKind::kAsPattern) {
          value = tree.first_named_child(value);
        }
        if (value == kNoNode || tree.kind(value) != NodeKind::kCall) continue;
        if (file.qualified_name(file.callee(value)) == "torch.distributed.autograd.context") {
          return true;
        }
      }
    }
  }
  return false;
}

void check(const FileAnalysis& file, FindingSink& sink) {
  std::vector<NodeId> reported_loops;
  for (NodeId step : file.calls()) {
    if (!file.is_optimizer_step_call(step) || in_distributed_autograd_context(file, step)) {
      continue;
    }
    // The innermost loop around the step that also runs backward().
    NodeId loop = file.innermost_loop(step);
    while (loop != kNoNode && !loop_calls_backward(file, loop)) loop = file.outer_loop(loop);
    if (loop == kNoNode) continue;
    if (std::find(reported_loops.begin(), reported_loops.end(), loop) != reported_loops.end()) {
      continue;
    }
    if (clears_gradients(file, loop)) continue;
    reported_loops.push_back(loop);
    RuleReport r;
    r.node = step;
    r.message = fmt::format(
        "`{}` runs every iteration after backward(), but nothing in this loop clears the "
        "gradients: each step applies the sum of all gradients so far (a correctness bug, not "
        "a leak)",
        quote(file, step));
    NodeId receiver = file.method_receiver(step);
    std::string optimizer = receiver != kNoNode ? quote(file, receiver, 30) : "optimizer";
    if (optimizer.find("scaler") != std::string::npos) {
      std::vector<NodeId> args = file.positional_arguments(step);
      if (!args.empty()) optimizer = quote(file, args.front(), 30);
    }
    r.fix = fmt::format(
        "call `{}.zero_grad(set_to_none=True)` once per iteration, before "
        "backward()",
        optimizer);
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_missing_zero_grad_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
