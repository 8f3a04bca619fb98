// GL103: backward(retain_graph=True) inside a training loop.
#include <fmt/format.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lint/import_table.h"
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

// Calls that hand out something new each time even when what they are
// called on is the same: `next(stream)`, `queue.get()`, `buffer.sample()`.
bool advances_state(const FileAnalysis& file, NodeId call) {
  std::string_view m = file.callee_last_name(call);
  return m == "next" || m == "__next__" || m == "get" || m == "get_nowait" || m == "pop" ||
         m == "popleft" || m == "recv" || m == "sample" || m == "read" || m == "step" ||
         m == "reset";
}

// What `loop` binds: the values assigned to each name or attribute path, and
// the names bound to something new at every iteration without a value to
// follow (loop variables, `with ... as`, augmented assignments).
struct LoopBindings {
  std::unordered_map<std::string, std::vector<NodeId>> values;
  std::unordered_set<std::string> fresh_each_iteration;
};

LoopBindings bindings_in(const FileAnalysis& file, NodeId loop) {
  const SyntaxTree& tree = file.tree();
  LoopBindings out;
  auto bind_all = [&](NodeId target, NodeId value) {
    for (NodeId t : bound_targets(tree, target)) {
      std::string d = dotted_text(tree, t);
      if (d.empty()) continue;
      if (value == kNoNode) {
        out.fresh_each_iteration.insert(d);
      } else {
        out.values[d].push_back(value);
      }
    }
  };
  for (const std::string& v : file.loop_variables(loop)) out.fresh_each_iteration.insert(v);
  for (NodeId id = loop; id < tree.node(loop).subtree_end; ++id) {
    switch (tree.kind(id)) {
      case NodeKind::kAssignment: {
        NodeId right = tree.child_by_field(id, Field::kRight);
        while (right != kNoNode && tree.kind(right) == NodeKind::kAssignment) {
          right = tree.child_by_field(right, Field::kRight);
        }
        bind_all(tree.child_by_field(id, Field::kLeft), right);
        break;
      }
      case NodeKind::kAugmentedAssignment:
        bind_all(tree.child_by_field(id, Field::kLeft), kNoNode);
        break;
      case NodeKind::kNamedExpression:
        bind_all(tree.child_by_field(id, Field::kName), tree.child_by_field(id, Field::kValue));
        break;
      case NodeKind::kForStatement:
      case NodeKind::kForInClause:
        bind_all(tree.child_by_field(id, Field::kLeft), kNoNode);
        break;
      case NodeKind::kAsPattern:
        bind_all(tree.child_by_field(id, Field::kAlias), kNoNode);
        break;
      default:
        break;
    }
  }
  return out;
}

// True when `expression`, followed through what the loop assigns, reads
// only values bound before the loop: every iteration rebuilds the same graph
// from the same inputs (a check or benchmark repeated N times), so no
// iteration's graph can feed the next one. A name the loop binds without a
// value to follow, a value that depends on itself (`hidden = f(x, hidden)`:
// carried), or a call that hands out something new each time (`next(it)`)
// means the inputs change.
constexpr int kMaxBindingDepth = 64;  // deeper chains count as changing inputs

bool built_from_loop_invariant_inputs(const FileAnalysis& file, NodeId expression,
                                      const LoopBindings& bound,
                                      std::unordered_set<std::string>& on_path,
                                      std::unordered_set<std::string>& invariant, int depth) {
  const SyntaxTree& tree = file.tree();
  if (depth > kMaxBindingDepth) return false;
  for (NodeId id = expression; id < tree.node(expression).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kCall && advances_state(file, id)) return false;
    if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
    if (k == NodeKind::kIdentifier && tree.node(id).field == Field::kAttributeName) continue;
    std::string d = dotted_text(tree, id);
    if (d.empty() || invariant.count(d) != 0) continue;
    if (bound.fresh_each_iteration.count(d) != 0) return false;
    auto it = bound.values.find(d);
    if (it == bound.values.end()) continue;
    if (!on_path.insert(d).second) return false;  // depends on itself: carried
    for (NodeId v : it->second) {
      if (!built_from_loop_invariant_inputs(file, v, bound, on_path, invariant, depth + 1)) {
        return false;
      }
    }
    on_path.erase(d);
    invariant.insert(d);
  }
  return true;
}

bool built_from_loop_invariant_inputs(const FileAnalysis& file, NodeId expression, NodeId loop) {
  LoopBindings bound = bindings_in(file, loop);
  std::unordered_set<std::string> on_path;
  std::unordered_set<std::string> invariant;
  return built_from_loop_invariant_inputs(file, expression, bound, on_path, invariant, 0);
}

void check(const FileAnalysis& file, FindingSink& sink) {
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
    // The same graph rebuilt from the same inputs every iteration.
    if (target != kNoNode && built_from_loop_invariant_inputs(file, target, loop)) continue;
    RuleReport r;
    r.node = call;
    r.message = fmt::format(
        "`{}` inside a loop keeps this iteration's autograd graph alive after backward; "
        "anything carried into the next iteration chains the graphs together",
        quote(file, call));
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_retain_graph_in_loop_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
