#include "training_loop.h"

#include <algorithm>

#include "vocabulary.h"

namespace gpuleak::lint {
namespace {

bool clears_gradients_within(const FileAnalysis& file, NodeId region, int depth) {
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
      // A function of this file, or a method of an instance of one of its
      // classes (`trainer.train_step(x)` with `trainer = Trainer(...)`).
      bool resolvable = receiver == kNoNode || dotted_text(tree, receiver) == "self" ||
                        !file.constructed_classes(receiver).empty();
      if (depth < 2 && resolvable && !m.empty()) {
        std::vector<std::size_t> callees =
            receiver == kNoNode ? file.scopes_named(m) : file.callees_of(id);
        for (std::size_t s : callees) {
          const Scope& scope = file.scopes()[s];
          if (scope.body != kNoNode && clears_gradients_within(file, scope.body, depth + 1)) {
            return true;
          }
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

template <typename Predicate>
bool any_call_in(const FileAnalysis& file, NodeId root, Predicate predicate) {
  const SyntaxTree& tree = file.tree();
  std::size_t scope = file.scope_index_of(root);
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kCall && file.scope_index_of(id) == scope && predicate(id)) {
      return true;
    }
  }
  return false;
}

bool mentions_evaluation_name(const FileAnalysis& file, NodeId expression) {
  if (expression == kNoNode) return false;
  const SyntaxTree& tree = file.tree();
  for (NodeId id = expression; id < tree.node(expression).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kIdentifier && vocabulary::is_evaluation_name(tree.text(id))) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool loop_calls_backward(const FileAnalysis& file, NodeId loop) {
  return any_call_in(file, loop, [&](NodeId c) { return file.is_backward_call(c); });
}

bool loop_steps_optimizer(const FileAnalysis& file, NodeId loop) {
  return any_call_in(file, loop, [&](NodeId c) { return file.is_optimizer_step_call(c); });
}

bool loop_runs_a_step(const FileAnalysis& file, NodeId loop) {
  return any_call_in(file, loop, [&](NodeId c) {
    if (file.innermost_loop(c) != loop) return false;
    return file.is_model_call(c) || file.is_backward_call(c) || file.is_optimizer_step_call(c);
  });
}

bool iterates_over_batches(const FileAnalysis& file, NodeId loop) {
  const SyntaxTree& tree = file.tree();
  if (tree.kind(loop) != NodeKind::kForStatement) return false;
  NodeId it = file.loop_iterable(loop);
  if (it == kNoNode) return false;
  for (NodeId id = it; id < tree.node(it).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kIdentifier && vocabulary::is_loader_name(tree.text(id))) {
      return true;
    }
  }
  return false;
}

namespace {

// The bound of `for ... in range(N)` / `range(a, N)`, N an integer literal
// or a name bound to one earlier in the function; -1 when unknown.
long constant_range_bound(const FileAnalysis& file, NodeId loop) {
  const SyntaxTree& tree = file.tree();
  NodeId it = file.loop_iterable(loop);
  if (tree.kind(loop) != NodeKind::kForStatement || it == kNoNode ||
      tree.kind(it) != NodeKind::kCall || file.qualified_name(file.callee(it)) != "range") {
    return -1;
  }
  std::vector<NodeId> args = file.positional_arguments(it);
  if (args.empty() || args.size() > 2) return -1;
  NodeId bound = args.back();
  if (tree.kind(bound) == NodeKind::kIdentifier) {
    NodeId last = file.last_assignment_before(tree.text(bound), loop, file.scope_index_of(loop));
    bound = last != kNoNode ? tree.child_by_field(last, Field::kRight) : kNoNode;
  }
  if (bound == kNoNode || tree.kind(bound) != NodeKind::kInteger) return -1;
  try {
    return std::stol(std::string(tree.text(bound)), nullptr, 0);
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

bool is_large_constant_loop(const FileAnalysis& file, NodeId loop) {
  return constant_range_bound(file, loop) > kSmallLoopIterations;
}

bool is_small_constant_loop(const FileAnalysis& file, NodeId loop) {
  const SyntaxTree& tree = file.tree();
  NodeId it = file.loop_iterable(loop);
  if (tree.kind(loop) != NodeKind::kForStatement || it == kNoNode ||
      tree.kind(it) != NodeKind::kCall || file.qualified_name(file.callee(it)) != "range") {
    return false;
  }
  std::vector<NodeId> args = file.positional_arguments(it);
  if (args.empty() || args.size() > 2) return false;
  NodeId bound = args.back();
  if (tree.kind(bound) == NodeKind::kIdentifier) {
    // n = 8 earlier in the same function.
    NodeId last = file.last_assignment_before(tree.text(bound), loop, file.scope_index_of(loop));
    bound = last != kNoNode ? tree.child_by_field(last, Field::kRight) : kNoNode;
  }
  if (bound == kNoNode || tree.kind(bound) != NodeKind::kInteger) return false;
  try {
    return std::stol(std::string(tree.text(bound)), nullptr, 0) <= kSmallLoopIterations;
  } catch (const std::exception&) {
    return false;
  }
}

bool runs_one_step(const FileAnalysis& file, std::size_t scope_index) {
  const Scope& scope = file.scopes()[scope_index];
  if (scope.body == kNoNode) return false;
  return any_call_in(file, scope.body, [&](NodeId c) {
    return file.innermost_loop(c) == kNoNode &&
           (file.is_backward_call(c) || file.is_optimizer_step_call(c));
  });
}

bool loop_steps_through_helper(const FileAnalysis& file, NodeId loop) {
  return any_call_in(file, loop, [&](NodeId c) {
    std::vector<std::size_t> callees = file.callees_of(c);
    return std::any_of(callees.begin(), callees.end(),
                       [&](std::size_t s) { return runs_one_step(file, s); });
  });
}

bool is_step_loop(const FileAnalysis& file, NodeId loop) {
  if (is_small_constant_loop(file, loop)) return false;
  if (iterates_over_batches(file, loop) || loop_calls_backward(file, loop) ||
      loop_steps_optimizer(file, loop) || loop_steps_through_helper(file, loop)) {
    return true;
  }
  if (!file.is_unbounded_loop(loop)) return false;
  // `while True:` in a method of an nn.Module decodes time steps of one call
  // (Tacotron2's inference until the gate fires): what it collects spans
  // that call, like the time steps of forward().
  const Scope& scope = file.scope_of(loop);
  const ClassFacts* owner =
      scope.class_node != kNoNode ? file.class_facts(scope.class_node) : nullptr;
  return owner == nullptr || !owner->is_module;
}

bool any_step_loop(const FileAnalysis& file, NodeId loop, int count) {
  for (NodeId l = loop; l != kNoNode && count > 0; l = file.outer_loop(l), --count) {
    if (is_step_loop(file, l)) return true;
  }
  return false;
}

bool is_evaluation_context(const FileAnalysis& file, NodeId site, NodeId loop) {
  if (loop != kNoNode) {
    // A loop that trains (backward or an optimizer step inside) never
    // counts as evaluation, whatever its names say.
    if (loop_calls_backward(file, loop) || loop_steps_optimizer(file, loop)) return false;
  }
  const Scope& scope = file.scope_of(site);
  if (vocabulary::is_evaluation_name(scope.name)) return true;
  for (NodeId l = loop; l != kNoNode; l = file.outer_loop(l)) {
    if (mentions_evaluation_name(file, file.loop_iterable(l))) return true;
  }
  // model.eval() earlier in the same scope, with no model.train() after it.
  // The last `x.eval()` and the last `x.train(...)` before the anchor, found
  // from the anchor backwards (not by a pass over every call before it).
  NodeId anchor = loop != kNoNode ? loop : site;
  std::size_t scope_index = file.scope_index_of(site);
  auto last_before = [&](std::string_view method, bool without_arguments) {
    const std::vector<NodeId>& calls = file.calls_named(method);
    for (auto it = std::lower_bound(calls.begin(), calls.end(), anchor); it != calls.begin();) {
      --it;
      if (file.scope_index_of(*it) != scope_index || file.method_receiver(*it) == kNoNode) continue;
      if (without_arguments && !file.positional_arguments(*it).empty()) continue;
      return static_cast<long>(*it);
    }
    return -1L;
  };
  long eval = last_before("eval", true);
  return eval >= 0 && eval > last_before("train", false);
}

bool differentiated_in_scope(const FileAnalysis& file, const std::string& name, std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  auto mentions_any = [&](NodeId root, const std::vector<std::string>& names) {
    for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
      NodeKind k = tree.kind(id);
      if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
      std::string d = dotted_text(tree, id);
      for (const auto& n : names) {
        if (d == n) return true;
      }
    }
    return false;
  };
  std::vector<std::string> names{name};
  // Only the scope's own nodes: its subtree (the whole file for the module).
  NodeId first = file.scopes()[scope].node;
  NodeId end = tree.node(first).subtree_end;
  // The backward calls come first: without one, nothing is differentiated.
  std::vector<NodeId> backward;
  const std::vector<NodeId>& calls = file.calls();
  for (auto it = std::lower_bound(calls.begin(), calls.end(), first);
       it != calls.end() && *it < end; ++it) {
    if (file.scope_index_of(*it) == scope && file.is_backward_call(*it)) backward.push_back(*it);
  }
  if (backward.empty()) return false;
  // One hop: `loss = torch.stack(losses).sum()`.
  for (NodeId id = first; id < end; ++id) {
    if (tree.kind(id) != NodeKind::kAssignment || file.scope_index_of(id) != scope) continue;
    NodeId left = tree.child_by_field(id, Field::kLeft);
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (left == kNoNode || right == kNoNode) continue;
    std::string target = dotted_text(tree, left);
    if (!target.empty() && target != name && mentions_any(right, {name})) names.push_back(target);
  }
  for (NodeId call : backward) {
    NodeId receiver = file.method_receiver(call);
    if (receiver != kNoNode && mentions_any(receiver, names)) return true;
    NodeId args = tree.child_by_field(call, Field::kArguments);
    if (args != kNoNode && mentions_any(args, names)) return true;
  }
  return false;
}

bool is_per_step_function(const Scope& scope) {
  const std::string& n = scope.name;
  return n == "training_step" || n == "train_step" || n == "validation_step" || n == "test_step" ||
         n == "predict_step" || n == "train_one_step" || n == "on_train_batch_end" ||
         n == "on_train_batch_start" || n == "on_validation_batch_end" ||
         n == "on_validation_batch_start" || n == "on_test_batch_end" ||
         n == "on_test_batch_start" || n == "on_predict_batch_end" ||
         n == "on_predict_batch_start" || n == "on_before_backward" || n == "on_after_backward" ||
         n == "on_before_optimizer_step" || n == "optimizer_step" || n == "training_step_end" ||
         n == "compute_loss";
}

namespace {

// Micro-batches of gradient accumulation: the loops a local container grows
// across never step the optimizer, and the loop around them that resets it
// every iteration steps it in its own body (`for sub_i in range(iter_size):
// total += loss / iter_size` inside the step loop, `scaler.step(optimizer)`
// after it). It holds one step's graphs at most, freed when it is reset.
bool filled_within_one_optimizer_step(const FileAnalysis& file, NodeId loop, int outlived) {
  NodeId resetting = loop;
  for (int i = 0; i < outlived && resetting != kNoNode; ++i) {
    if (loop_steps_optimizer(file, resetting)) return false;
    resetting = file.outer_loop(resetting);
  }
  if (resetting == kNoNode) return false;
  return any_call_in(file, resetting, [&](NodeId c) {
    return file.innermost_loop(c) == resetting && file.is_optimizer_step_call(c);
  });
}

}  // namespace

std::optional<GrowthVerdict> graph_kept_across_steps(const FileAnalysis& file,
                                                     const StoreEvent& store) {
  if (!(store.value_bits & kCarriesGraph)) return std::nullopt;
  if (file.is_hook_scope(store.scope)) return std::nullopt;  // GL202 speaks for hooks
  if (store.kind == StoreKind::kLocalName || store.kind == StoreKind::kAttribute ||
      store.kind == StoreKind::kGlobalName) {
    return std::nullopt;
  }
  GrowthVerdict growth = store_growth(file, store);
  if (growth.growth == Growth::kBounded) return std::nullopt;
  if (growth.growth == Growth::kPerIteration && growth.local &&
      (!any_step_loop(file, growth.loop, growth.loops_outlived) ||
       filled_within_one_optimizer_step(file, growth.loop, growth.loops_outlived))) {
    return std::nullopt;
  }
  return growth;
}

void for_each_graph_kept_across_steps(
    const FileAnalysis& file, StepPurpose purpose,
    const std::function<void(const StoreEvent&, const GrowthVerdict&)>& visit) {
  for (const StoreEvent& store : file.stores()) {
    std::optional<GrowthVerdict> kept = graph_kept_across_steps(file, store);
    if (!kept) continue;
    bool evaluation = is_evaluation_context(file, store.site, kept->loop);
    if (evaluation == (purpose == StepPurpose::kEvaluation)) visit(store, *kept);
  }
}

bool clears_gradients(const FileAnalysis& file, NodeId region) {
  return clears_gradients_within(file, region, 0);
}

}  // namespace gpuleak::lint
