// GL105: backward(create_graph=True), which makes each leaf's .grad keep a
// graph that references the leaf itself.
#include <fmt/format.h>

#include <string>
#include <vector>

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

// The loops that run `call`: the loop around it, or, for a call in a
// function with no loop of its own (timm's nested `_backward`), the loops
// around calls of that function in this file.
std::vector<NodeId> loops_running(const FileAnalysis& file, NodeId call) {
  NodeId loop = file.innermost_loop(call);
  if (loop != kNoNode) return {loop};
  std::vector<NodeId> loops;
  const std::string& name = file.scopes()[file.scope_index_of(call)].name;
  for (NodeId other : file.calls()) {
    if (file.callee_last_name(other) != name) continue;
    NodeId around = file.innermost_loop(other);
    if (around != kNoNode) loops.push_back(around);
  }
  return loops;
}

// Something makes inputs leaves (`x.requires_grad_()`, `requires_grad=True`,
// `x.requires_grad = True`) in `region`: their `.grad` is not cleared by an
// optimizer, so their cycle stays.
bool makes_input_leaves(const FileAnalysis& file, NodeId region) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = region; id < tree.node(region).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kCall) {
      if (file.callee_last_name(id) == "requires_grad_") return true;
      NodeId flag = file.keyword_argument(id, "requires_grad");
      if (flag != kNoNode && tree.kind(flag) != NodeKind::kFalse) return true;
    } else if (k == NodeKind::kAssignment) {
      NodeId left = tree.child_by_field(id, Field::kLeft);
      std::string_view text = left != kNoNode ? file.text(left) : std::string_view();
      if (text.ends_with(".requires_grad")) return true;
    }
  }
  return false;
}

// The gradients are cleared at every step (zero_grad() sets `.grad` to
// None, or detaches it): each parameter's cycle lasts one step, and nothing
// grows, as long as only parameters are leaves and no module backward hook
// holds on to the graph (pytorch/pytorch#82528 leaks with
// register_full_backward_hook despite zero_grad()). Measured on torch 1.13,
// CPU: bench/lint/create_graph_cycle.py grows by 7.8 MiB per step without
// zero_grad() and stays flat with it.
bool cycle_broken_each_step(const FileAnalysis& file, NodeId call) {
  std::vector<NodeId> loops = loops_running(file, call);
  if (loops.empty()) return false;
  NodeId function = file.scopes()[file.scope_index_of(call)].node;
  if (makes_input_leaves(file, function)) return false;
  for (NodeId loop : loops) {
    if (makes_input_leaves(file, loop) || !clears_gradients(file, loop)) return false;
  }
  return true;
}

// A module backward hook in the file: with create_graph, its grad_input and
// grad_output kept the graph whatever was done to `.grad` (pytorch/pytorch
// #71068 and #82528, fixed in PyTorch by #82788; older versions are still run).
bool registers_module_backward_hooks(const FileAnalysis& file) {
  for (NodeId call : file.calls()) {
    std::string_view m = file.callee_last_name(call);
    if (m == "register_full_backward_hook" || m == "register_backward_hook") return true;
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

void check(const FileAnalysis& file, FindingSink& sink) {
  for (NodeId call : file.calls()) {
    // autograd.grad(create_graph=True) returns the gradients: no cycle.
    if (!file.is_backward_call(call) || !creates_graph(file, call)) continue;
    if (!registers_module_backward_hooks(file) &&
        (grads_reset_after(file, call) || cycle_broken_each_step(file, call))) {
      continue;
    }
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

}  // namespace

std::unique_ptr<Rule> make_backward_create_graph_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
