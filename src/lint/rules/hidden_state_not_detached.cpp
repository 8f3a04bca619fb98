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

// `x.device`, `x.shape`, `x.size(0)`, `w.to(x)`, `w.type_as(x)`: what is
// read of `x` is no tensor value.
bool only_metadata_read(const FileAnalysis& file, NodeId identifier) {
  const SyntaxTree& tree = file.tree();
  NodeId parent = tree.parent(identifier);
  if (parent != kNoNode && tree.kind(parent) == NodeKind::kAttribute &&
      tree.child_by_field(parent, Field::kObject) == identifier) {
    NodeId attribute = tree.child_by_field(parent, Field::kAttributeName);
    std::string_view a = attribute != kNoNode ? tree.text(attribute) : std::string_view();
    if (a == "device" || a == "dtype" || a == "shape" || a == "ndim" || a == "size" || a == "dim" ||
        a == "is_cuda" || a == "numel") {
      return true;
    }
  }
  // An argument (or part of one) of `.to(...)` / `.type_as(...)`.
  while (parent != kNoNode && tree.kind(parent) == NodeKind::kAttribute) {
    parent = tree.parent(parent);
  }
  if (parent == kNoNode || tree.kind(parent) != NodeKind::kArgumentList) return false;
  NodeId call = tree.parent(parent);
  if (call == kNoNode || tree.kind(call) != NodeKind::kCall) return false;
  std::string_view method = file.callee_last_name(call);
  return method == "to" || method == "type_as";
}

// The right side of the last assignment in the scope, before `at`, that binds
// `name` (`mean, var = x.mean(0), x.var(0)` binds both); kNoNode if none.
NodeId value_last_bound_to(const FileAnalysis& file, std::string_view name, NodeId at,
                           std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  NodeId root = file.scopes()[scope].node;
  NodeId found = kNoNode;
  for (NodeId id = root; id < at && id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kAssignment || file.scope_index_of(id) != scope) continue;
    NodeId left = tree.child_by_field(id, Field::kLeft);
    if (left == kNoNode) continue;
    for (NodeId target : bound_targets(tree, left)) {
      if (tree.text(target) == name) found = tree.child_by_field(id, Field::kRight);
    }
  }
  return found;
}

// `self.weight = nn.Parameter(...)` somewhere in the class.
bool attribute_is_parameter(const FileAnalysis& file, NodeId class_node,
                            const std::string& dotted) {
  const SyntaxTree& tree = file.tree();
  if (class_node == kNoNode || dotted.rfind("self.", 0) != 0) return false;
  for (NodeId id = class_node; id < tree.node(class_node).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kAssignment) continue;
    NodeId left = tree.child_by_field(id, Field::kLeft);
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (left == kNoNode || right == kNoNode || tree.kind(right) != NodeKind::kCall) continue;
    if (dotted_text(tree, left) == dotted && file.callee_last_name(right) == "Parameter") {
      return true;
    }
  }
  return false;
}

// Whether `expression` may carry the autograd graph of the call it runs in:
// it mentions a parameter of `scope` other than self (the batch), a local
// computed from one earlier in the function (`mean = x.mean(0)`), or an
// `nn.Parameter` attribute of the class (`self.weight`).
bool mentions_graph_input(const FileAnalysis& file, const Scope& scope, NodeId expression,
                          NodeId at, const std::string& carried) {
  const SyntaxTree& tree = file.tree();
  std::size_t scope_index = file.scope_index_of(at);
  auto is_input = [&](std::string_view name) {
    return name != "self" && std::find(scope.parameters.begin(), scope.parameters.end(), name) !=
                                 scope.parameters.end();
  };
  auto reads_values = [&](NodeId id) { return !only_metadata_read(file, id); };
  for (NodeId id = expression; id < tree.node(expression).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kAttribute) {
      std::string dotted = dotted_text(tree, id);
      if (dotted != carried && attribute_is_parameter(file, scope.class_node, dotted)) return true;
      continue;
    }
    if (k != NodeKind::kIdentifier || !reads_values(id)) continue;
    std::string_view name = tree.text(id);
    if (is_input(name)) return true;
    NodeId right = value_last_bound_to(file, name, at, scope_index);
    // `with torch.no_grad(): means = kmeans_iter(x, ...)`: made from the
    // input, but without a graph.
    if (right == kNoNode || file.grad_disabled_at(right)) continue;
    for (NodeId r = right; r < tree.node(right).subtree_end; ++r) {
      if (tree.kind(r) == NodeKind::kIdentifier && is_input(tree.text(r)) && reads_values(r)) {
        return true;
      }
    }
  }
  return false;
}

// The method of `class_node` that `statement` lies in; empty outside one.
std::string method_name_of(const FileAnalysis& file, NodeId statement) {
  const Scope& s = file.scope_of(statement);
  return s.class_node != kNoNode ? s.name : std::string();
}

// True when `self.X` (`name`) restarts on every call that feeds it back: a
// method other than __init__ binds it afresh (the right side does not read
// it: `self.h = memory.new_zeros(...)`, `self.h = None`), and a method of the
// class calls both that method and `feeding` (a decoder's forward calls
// `initialize_decoder_states` and then `decode` per time step), or `feeding`
// calls it itself. The chain then spans one call, which is one graph by design.
bool restarted_by_each_call(const FileAnalysis& file, NodeId class_node, const std::string& name,
                            const std::string& feeding) {
  const SyntaxTree& tree = file.tree();
  std::vector<std::string> restarting;
  for (NodeId a : file.assignments_to(name)) {
    if (!tree.contains(class_node, a)) continue;
    std::string method = method_name_of(file, a);
    if (method.empty() || method == "__init__" || method == feeding) continue;
    NodeId right = tree.child_by_field(a, Field::kRight);
    if (right == kNoNode || mentions(tree, right, name)) continue;
    restarting.push_back(method);
  }
  if (restarting.empty()) return false;
  auto self_calls_in = [&](const std::string& caller, const std::string& callee) {
    for (NodeId call : file.calls_named(callee)) {
      NodeId receiver = file.method_receiver(call);
      if (receiver == kNoNode || tree.text(receiver) != "self" ||
          !tree.contains(class_node, call)) {
        continue;
      }
      if (caller.empty() || method_name_of(file, call) == caller) return true;
    }
    return false;
  };
  for (const auto& r : restarting) {
    if (self_calls_in(feeding, r)) return true;
    for (NodeId call : file.calls_named(r)) {
      NodeId receiver = file.method_receiver(call);
      if (receiver == kNoNode || tree.text(receiver) != "self" ||
          !tree.contains(class_node, call)) {
        continue;
      }
      std::string caller = method_name_of(file, call);
      if (!caller.empty() && self_calls_in(caller, feeding)) return true;
    }
  }
  return false;
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

// A running value of a module updated from its own previous value and from
// the batch on every call, outside no_grad: `self.running_mean = m *
// self.running_mean + (1 - m) * mean` in forward (a custom batch norm, an
// average of the weights). Each call's value keeps the graph of its batch
// and, through its previous value, every earlier one.
void report_running_value(const FileAnalysis& file, NodeId assignment, NodeId left,
                          FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  const Scope& scope = file.scope_of(assignment);
  // forward() runs once per batch; a method that runs once (set_input_size,
  // prune_intermediate_layers, reset_classifier) only rebuilds its attribute.
  if (scope.class_node == kNoNode || scope.grad_disabled ||
      (scope.name != "forward" && !is_per_step_function(scope))) {
    return;
  }
  const ClassFacts* owner = file.class_facts(scope.class_node);
  if (owner == nullptr || !owner->is_module) return;
  if (file.innermost_loop(assignment) != kNoNode) return;
  NodeId right = tree.child_by_field(assignment, Field::kRight);
  if (right == kNoNode || file.grad_disabled_at(right)) return;
  // `nn.Parameter(...)` makes a new leaf: no graph goes through it.
  if (tree.kind(right) == NodeKind::kCall && file.callee_last_name(right) == "Parameter") return;
  std::string_view text = tree.text(right);
  if (text.find("detach") != std::string_view::npos ||
      text.find(".data") != std::string_view::npos) {
    return;
  }
  std::vector<std::string> targets;
  targets_of(tree, left, targets);
  std::string carried;
  for (const auto& t : targets) {
    if (t.rfind("self.", 0) != 0 || !mentions(tree, right, t)) continue;
    if (cut_in(file, scope.class_node, t, assignment, true)) continue;
    carried = t;
    break;
  }
  if (carried.empty() || !mentions_graph_input(file, scope, right, assignment, carried)) return;
  RuleReport r;
  r.node = assignment;
  r.message = fmt::format(
      "`{}` is computed from its previous value and from this call's inputs on every call of "
      "`{}`, with gradients on: each call's value keeps its batch's graph and, through the "
      "previous value, all the earlier ones",
      carried, scope.name);
  r.fix = fmt::format(
      "update it without a graph: under `with torch.no_grad():`, or from detached values "
      "(`{} = ... .detach()`)",
      carried);
  sink.report(kInfo, std::move(r));
}

void check(const FileAnalysis& file, FindingSink& sink) {
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
    if (left == kNoNode) continue;
    if (call == kNoNode || tree.kind(call) != NodeKind::kCall || !file.is_model_call(call)) {
      report_running_value(file, id, left, sink);
      continue;
    }
    if (file.grad_disabled_at(call)) continue;
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
        if (!cut_in(file, scope.class_node, h, id, true) &&
            !restarted_by_each_call(file, scope.class_node, h, scope.name)) {
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

}  // namespace

std::unique_ptr<Rule> make_hidden_state_not_detached_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
