// GL103: backward(retain_graph=True) inside a training loop.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL103",
    "retain-graph-in-loop",
    Severity::kWarning,
    Cause::kAutogradGraphKept,
    "`retain_graph=True` inside a loop keeps each iteration's graph after backward().",
    "`retain_graph=True` keeps every buffer of the graph alive after `backward()` instead of "
    "freeing it. In a loop, anything that links one iteration to the next (a hidden state "
    "without `detach()`, a running loss) then chains each step's graph to the previous one, so "
    "memory and backward time grow every step. It is usually added to silence \"Trying to "
    "backward through the graph a second time\", whose cause is exactly such a link.",
    "Remove `retain_graph=True` and cut what is carried between iterations with `.detach()` "
    "(`hidden = hidden.detach()`). Keep it only when a second backward through the same graph "
    "follows in the same iteration.",
};

bool is_gradient_call(const FileAnalysis& file, NodeId call) {
  if (file.is_backward_call(call)) return true;
  std::string q = file.qualified_name(file.callee(call));
  return q == "torch.autograd.grad" || q == "autograd.grad";
}

bool retains(const FileAnalysis& file, NodeId call) {
  NodeId flag = file.keyword_argument(call, "retain_graph");
  return flag != kNoNode && file.tree().kind(flag) == NodeKind::kTrue;
}

// The tensor differentiated: `loss` in loss.backward(), the first argument
// of autograd.grad/backward.
NodeId differentiated(const FileAnalysis& file, NodeId call) {
  if (file.callee_last_name(call) == "backward" && file.method_receiver(call) != kNoNode &&
      file.qualified_name(file.callee(call)) != "torch.autograd.backward") {
    return file.method_receiver(call);
  }
  std::vector<NodeId> args = file.positional_arguments(call);
  if (!args.empty()) return args.front();
  NodeId kw = file.keyword_argument(call, "outputs");
  return kw != kNoNode ? kw : file.keyword_argument(call, "tensors");
}

bool assigned_in(const FileAnalysis& file, const std::string& root, NodeId loop) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = loop; id < tree.node(loop).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k != NodeKind::kAssignment && k != NodeKind::kAugmentedAssignment) continue;
    NodeId left = tree.child_by_field(id, Field::kLeft);
    if (left == kNoNode) continue;
    for (NodeId t = left; t < tree.node(left).subtree_end; ++t) {
      if (tree.kind(t) == NodeKind::kIdentifier && tree.text(t) == root) return true;
    }
  }
  return false;
}

class RetainGraphInLoop final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    const SyntaxTree& tree = file.tree();
    for (NodeId call : file.calls()) {
      if (!is_gradient_call(file, call) || !retains(file, call)) continue;
      NodeId loop = file.innermost_loop(call);
      if (loop == kNoNode) continue;
      // A later backward in the same iteration without retain_graph frees
      // the graph (GAN and gradient-penalty steps).
      bool freed_later = false;
      for (NodeId other : file.calls()) {
        if (other <= call || !tree.contains(loop, other)) continue;
        if (file.scope_index_of(other) != file.scope_index_of(call)) continue;
        if (is_gradient_call(file, other) && !retains(file, other)) freed_later = true;
      }
      if (freed_later) continue;
      // A graph built before the loop is retained once, not once per
      // iteration (rows of a Jacobian).
      NodeId target = differentiated(file, call);
      std::string root = container_path(file, target);
      root = root.substr(0, root.find('.'));
      if (!root.empty() && !assigned_in(file, root, loop)) continue;
      RuleReport r;
      r.node = call;
      r.message = fmt::format(
          "`{}` inside a loop keeps this iteration's autograd graph alive after backward; "
          "anything carried into the next iteration chains the graphs together",
          quote(file, call));
      sink.report(kInfo, std::move(r));
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_retain_graph_in_loop_rule() {
  return std::make_unique<RetainGraphInLoop>();
}

}  // namespace gpuleak::lint
