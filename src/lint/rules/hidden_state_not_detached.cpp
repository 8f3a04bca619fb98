// GL104: a recurrent state is fed back into the model every iteration (or
// every call, through an attribute) without detach().
#include <fmt/format.h>

#include <algorithm>

#include "lint/rules/rule_factories.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL104",
    "hidden-state-not-detached",
    Severity::kError,
    Cause::kAutogradGraphKept,
    "A hidden state is carried across iterations without detach().",
    "A recurrent state returned by the model still references the graph that produced it. "
    "Feeding it into the next iteration without `.detach()` links every step's graph to all the "
    "previous ones: `backward()` then fails with \"Trying to backward through the graph a second "
    "time\", or, with `retain_graph=True` or with no `backward()` at all (evaluation without "
    "no_grad), the graph and its activations grow with every step.",
    "Cut the history once per iteration: `hidden = hidden.detach()` (for an LSTM's tuple, "
    "`hidden = tuple(h.detach() for h in hidden)`).",
};

void dotted_names_in(const SyntaxTree& tree, NodeId root, std::vector<std::string>& out) {
  if (root == kNoNode) return;
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
    std::string d = dotted_text(tree, id);
    if (!d.empty() && d != "self") out.push_back(std::move(d));
  }
}

// Names bound by an assignment's left side (identifiers and attributes,
// through tuple patterns).
void targets_of(const SyntaxTree& tree, NodeId left, std::vector<std::string>& out) {
  for (NodeId name : bound_targets(tree, left)) out.push_back(dotted_text(tree, name));
}

bool mentions(const SyntaxTree& tree, NodeId root, const std::string& name) {
  if (root == kNoNode) return false;
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if ((k == NodeKind::kIdentifier || k == NodeKind::kAttribute) &&
        dotted_text(tree, id) == name) {
      return true;
    }
  }
  return false;
}

// Whether `region` cuts `name`'s history: another assignment to it (a
// detach, a re-initialisation; with `only_detaching`, only assignments that
// detach), `name.detach_()`, or `for h in name: h.detach_()`.
bool cut_in(const FileAnalysis& file, NodeId region, const std::string& name, NodeId except,
            bool only_detaching) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = region; id < tree.node(region).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kAssignment && id != except) {
      std::vector<std::string> targets;
      NodeId left = tree.child_by_field(id, Field::kLeft);
      if (left != kNoNode) targets_of(tree, left, targets);
      if (std::find(targets.begin(), targets.end(), name) == targets.end()) continue;
      if (!only_detaching) return true;
      std::string_view right = tree.text(tree.child_by_field(id, Field::kRight));
      if (right.find("detach") != std::string_view::npos ||
          right.find("repackage") != std::string_view::npos) {
        return true;
      }
    } else if (k == NodeKind::kCall) {
      std::string_view m = file.callee_last_name(id);
      bool detaching = m.find("detach") != std::string_view::npos ||
                       m.find("repackage") != std::string_view::npos;
      if (!detaching) continue;
      if (mentions(tree, id, name)) return true;
      // for h in hidden: h.detach_()
      for (NodeId p = tree.parent(id); p != kNoNode && tree.contains(region, p);
           p = tree.parent(p)) {
        if (tree.kind(p) == NodeKind::kForStatement &&
            mentions(tree, tree.child_by_field(p, Field::kRight), name)) {
          return true;
        }
      }
    }
  }
  return false;
}

// The model call on the right of the last assignment to `name` before `at`,
// in the same block; kNoNode otherwise.
NodeId model_call_assigned_before(const FileAnalysis& file, NodeId name, NodeId at) {
  const SyntaxTree& tree = file.tree();
  if (name == kNoNode || tree.kind(name) != NodeKind::kIdentifier) return kNoNode;
  NodeId statement = tree.parent(at);
  if (statement == kNoNode || tree.kind(statement) != NodeKind::kExpressionStatement) {
    return kNoNode;
  }
  NodeId block = tree.parent(statement);
  if (block == kNoNode) return kNoNode;
  // The scope's assignments to the name, from `at` back to the block's start:
  // the first one that is a statement of this block.
  const std::vector<NodeId>& all =
      file.assignments_in_scope(tree.text(name), file.scope_index_of(at));
  for (auto it = std::lower_bound(all.begin(), all.end(), statement); it != all.begin();) {
    --it;
    NodeId a = *it;
    if (a < block) break;
    NodeId st = tree.parent(a);
    if (st == kNoNode || tree.kind(st) != NodeKind::kExpressionStatement ||
        tree.parent(st) != block || tree.first_named_child(st) != a) {
      continue;
    }
    NodeId r = tree.child_by_field(a, Field::kRight);
    return r != kNoNode && tree.kind(r) == NodeKind::kCall && file.is_model_call(r) ? r : kNoNode;
  }
  return kNoNode;
}

// `for layer in self.layers: h = layer(h)`, or `h = self.layers[i](h)` with `i`
// the loop's variable: the loop walks a list of modules, so `h` goes once
// through each of them (one forward pass), not again through one model at
// every time step.
bool loop_walks_the_called_modules(const FileAnalysis& file, NodeId loop, NodeId call) {
  const SyntaxTree& tree = file.tree();
  NodeId callee = tree.child_by_field(call, Field::kFunction);
  if (callee == kNoNode) return false;
  std::vector<std::string> loop_names = file.loop_variables(loop);  // none for a while loop
  auto is_loop_name = [&](NodeId id) {
    return std::find(loop_names.begin(), loop_names.end(), tree.text(id)) != loop_names.end();
  };
  if (tree.kind(callee) == NodeKind::kIdentifier) return is_loop_name(callee);
  if (tree.kind(callee) != NodeKind::kSubscript) return false;
  NodeId index = tree.child_by_field(callee, Field::kSubscriptIndex);
  return index != kNoNode && tree.kind(index) == NodeKind::kIdentifier && is_loop_name(index);
}

// Per scope: whether it calls backward(); one pass over the calls for the
// whole file, not one per assignment.
std::vector<bool> scopes_calling_backward(const FileAnalysis& file) {
  std::vector<bool> out(file.scopes().size(), false);
  for (NodeId call : file.calls()) {
    if (file.is_backward_call(call)) out[file.scope_index_of(call)] = true;
  }
  return out;
}

class HiddenStateNotDetached final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    const SyntaxTree& tree = file.tree();
    std::vector<bool> calls_backward;  // filled on first use
    for (NodeId id = 0; id < tree.size(); ++id) {
      if (tree.kind(id) != NodeKind::kAssignment) continue;
      NodeId left = tree.child_by_field(id, Field::kLeft);
      NodeId call = tree.child_by_field(id, Field::kRight);
      while (call != kNoNode && (tree.kind(call) == NodeKind::kSubscript ||
                                 tree.kind(call) == NodeKind::kParenthesizedExpression)) {
        call = tree.kind(call) == NodeKind::kSubscript ? tree.child_by_field(call, Field::kValue)
                                                       : tree.first_named_child(call);
      }
      // `outputs = model(x, state=state)` then `state = outputs.state`: the
      // state is read back from what the model returned one statement before.
      if (left != kNoNode && call != kNoNode && tree.kind(call) == NodeKind::kAttribute) {
        call = model_call_assigned_before(file, tree.child_by_field(call, Field::kObject), id);
      }
      if (left == kNoNode || call == kNoNode || tree.kind(call) != NodeKind::kCall) continue;
      if (!file.is_model_call(call) || file.grad_disabled_at(call)) continue;
      if (!(file.value_bits(call) & kCarriesGraph)) continue;
      std::vector<std::string> targets;
      targets_of(tree, left, targets);
      std::vector<std::string> inputs;
      dotted_names_in(tree, tree.child_by_field(call, Field::kArguments), inputs);
      std::vector<std::string> carried;
      for (const auto& t : targets) {
        if (!t.empty() && std::find(inputs.begin(), inputs.end(), t) != inputs.end()) {
          carried.push_back(t);
        }
      }
      if (carried.empty()) continue;

      const Scope& scope = file.scope_of(id);
      NodeId loop = file.innermost_loop(id);
      std::string carried_name;
      std::string span;
      if (loop != kNoNode) {
        // Time steps inside forward() are one graph by design.
        const ClassFacts* owner =
            scope.class_node != kNoNode ? file.class_facts(scope.class_node) : nullptr;
        if (scope.name == "forward" && owner != nullptr && owner->is_module) continue;
        if (loop_walks_the_called_modules(file, loop, call)) continue;
        // A loop over batches or steps; or an evaluation loop whose graph
        // nothing consumes (no backward in the function), over any range.
        bool steps = iterates_over_batches(file, loop) || loop_calls_backward(file, loop) ||
                     loop_steps_optimizer(file, loop) || file.is_unbounded_loop(loop);
        // Nothing differentiates the graph: evaluation, or any loop that is
        // not a handful of known iterations, only makes it longer.
        if (calls_backward.empty()) calls_backward = scopes_calling_backward(file);
        bool never_consumed = !calls_backward[file.scope_index_of(id)];
        bool evaluation = never_consumed && (is_evaluation_context(file, id, loop) ||
                                             is_large_constant_loop(file, loop));
        if (!steps && !evaluation) continue;
        for (const auto& h : carried) {
          if (!cut_in(file, file.loop_body(loop), h, id, false)) {
            carried_name = h;
            break;
          }
        }
        span = "iteration";
      } else {
        if (scope.class_node == kNoNode || scope.name == "__init__") continue;
        for (const auto& h : carried) {
          if (h.rfind("self.", 0) != 0) continue;
          if (!cut_in(file, scope.class_node, h, id, true)) {
            carried_name = h;
            break;
          }
        }
        span = "call";
      }
      if (carried_name.empty()) continue;
      RuleReport r;
      r.node = id;
      r.message = fmt::format(
          "`{}` is fed back into `{}` on every {} without `.detach()`: each step's graph stays "
          "linked to all the previous ones",
          carried_name, quote(file, file.callee(call), 40), span);
      r.fix = fmt::format(
          "detach it once per {}: `{} = {}.detach()` (for an LSTM tuple: `{} = tuple(h.detach() "
          "for h in {})`)",
          span, carried_name, carried_name, carried_name, carried_name);
      sink.report(kInfo, std::move(r));
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_hidden_state_not_detached_rule() {
  return std::make_unique<HiddenStateNotDetached>();
}

}  // namespace gpuleak::lint
