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

bool clears_gradients(const FileAnalysis& file, NodeId region, int depth);

// zero_grad(), `p.grad = None`, `p.grad.zero_()`, or a call to a function of
// this file that does one of those.
bool clears_gradients(const FileAnalysis& file, NodeId region, int depth) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = region; id < tree.node(region).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kCall) {
      std::string_view m = file.callee_last_name(id);
      if (m == "zero_grad" || m == "clear_grad" || m == "zero_grads") return true;
      NodeId receiver = file.method_receiver(id);
      if ((m == "zero_" || m == "detach_" || m == "requires_grad_") && receiver != kNoNode &&
          file.text(receiver).find("grad") != std::string_view::npos) {
        return true;
      }
      if (depth < 2 && receiver == kNoNode && !m.empty()) {
        for (std::size_t s : file.scopes_named(m)) {
          const Scope& scope = file.scopes()[s];
          if (scope.body != kNoNode && clears_gradients(file, scope.body, depth + 1)) return true;
        }
      }
    } else if (k == NodeKind::kAssignment) {
      NodeId left = tree.child_by_field(id, Field::kLeft);
      std::string_view text = left != kNoNode ? file.text(left) : std::string_view();
      if (text.size() >= 5 && text.substr(text.size() - 5) == ".grad") return true;
    }
  }
  return false;
}

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

class MissingZeroGrad final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
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
      if (clears_gradients(file, loop, 0)) continue;
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
};

}  // namespace

std::unique_ptr<Rule> make_missing_zero_grad_rule() { return std::make_unique<MissingZeroGrad>(); }

}  // namespace gpuleak::lint
