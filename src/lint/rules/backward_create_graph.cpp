// GL105: backward(create_graph=True), which makes each leaf's .grad keep a
// graph that references the leaf itself.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL105",
    "backward-create-graph",
    Severity::kWarning,
    Cause::kAutogradGraphKept,
    "`backward(create_graph=True)` leaves a reference cycle between each leaf and its `.grad`.",
    "With `create_graph=True`, `backward()` stores in every leaf's `.grad` (the parameters, or an "
    "input that requires grad) a gradient that has its own graph, and that graph references the "
    "leaf: leaf -> .grad -> grad_fn -> leaf. The cycle is in C++ autograd objects, so neither "
    "reference counting nor Python's cycle collector frees it: each call leaves the graph and "
    "its saved tensors on the GPU until `.grad` is reset by hand. PyTorch itself warns about it.",
    "Use `torch.autograd.grad(loss, inputs, create_graph=True)`, which returns the gradients "
    "instead of storing them in `.grad`; or set `.grad = None` on the leaves once the gradients "
    "have been used.",
};

bool creates_graph(const FileAnalysis& file, NodeId call) {
  NodeId flag = file.keyword_argument(call, "create_graph");
  if (flag == kNoNode) return false;
  NodeKind k = file.tree().kind(flag);
  return k != NodeKind::kFalse && k != NodeKind::kNone;
}

// `p.grad = None` later in the same function breaks the cycle by hand.
bool grads_reset_after(const FileAnalysis& file, NodeId call) {
  const SyntaxTree& tree = file.tree();
  std::size_t scope = file.scope_index_of(call);
  NodeId root = file.scopes()[scope].node;
  for (NodeId id = call; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kAssignment || file.scope_index_of(id) != scope) continue;
    NodeId left = tree.child_by_field(id, Field::kLeft);
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (left == kNoNode || right == kNoNode || tree.kind(right) != NodeKind::kNone) continue;
    if (tree.kind(left) != NodeKind::kAttribute) continue;
    NodeId attr = tree.child_by_field(left, Field::kAttributeName);
    if (attr != kNoNode && tree.text(attr) == "grad") return true;
  }
  return false;
}

// In a loop, in a function that runs per step, or in a function called
// from a loop of this file.
bool runs_repeatedly(const FileAnalysis& file, NodeId call) {
  // A handful of known iterations (`for _ in range(6)`) stays bounded.
  NodeId loop = file.innermost_loop(call);
  if (loop != kNoNode) return !is_small_constant_loop(file, loop);
  std::size_t scope = file.scope_index_of(call);
  if (file.runs_per_step(scope)) return true;
  const std::string& name = file.scopes()[scope].name;
  const SyntaxTree& tree = file.tree();
  for (NodeId other : file.calls()) {
    if (file.callee_last_name(other) != name) continue;
    if (file.innermost_loop(other) != kNoNode ||
        tree.ancestor_of_kind(
            other, {NodeKind::kListComprehension, NodeKind::kGeneratorExpression,
                    NodeKind::kSetComprehension, NodeKind::kDictionaryComprehension}) != kNoNode) {
      return true;
    }
  }
  return false;
}

class BackwardCreateGraph final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    for (NodeId call : file.calls()) {
      // autograd.grad(create_graph=True) returns the gradients: no cycle.
      if (!file.is_backward_call(call) || !creates_graph(file, call)) continue;
      if (grads_reset_after(file, call)) continue;
      // One call leaves one graph behind; it grows when the call repeats.
      if (!runs_repeatedly(file, call)) continue;
      RuleReport r;
      r.node = call;
      r.message = fmt::format(
          "`{}` stores gradients that keep their own graph in `.grad`; each leaf and its `.grad` "
          "then reference each other, and the cycle is never collected",
          quote(file, call));
      sink.report(kInfo, std::move(r));
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_backward_create_graph_rule() {
  return std::make_unique<BackwardCreateGraph>();
}

}  // namespace gpuleak::lint
