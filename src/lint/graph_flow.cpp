// GraphFlow's rounds over the file's scopes: what each scope starts with
// (parameters, class attributes, hook arguments), the names it
// differentiates, and the summaries rounds exchange until nothing changes.
#include "graph_flow.h"

#include <algorithm>
#include <unordered_map>

#include "graph_flow_shared.h"
#include "lightning_hooks.h"
#include "vocabulary.h"

namespace gpuleak::lint {

using namespace graph_flow;

GraphFlow::GraphFlow(FileAnalysis& file) : file_(file), tree_(file.tree()) {}

void GraphFlow::run() {
  std::size_t n = file_.scopes_.size();
  parameter_sinks_.assign(n, 0);
  parameter_sums_.assign(n, 0);
  parameter_graph_sinks_.assign(n, 0);
  argument_containers_.clear();
  argument_slot_writes_.clear();
  learnt_.returns.assign(n, 0);
  learnt_.return_elements.assign(n, {});
  learnt_.arguments.assign(n, {});
  for (std::size_t i = 0; i < n; ++i) {
    learnt_.arguments[i].assign(file_.scopes_[i].parameters.size(), 0);
  }
  // Each round reads what the previous one learnt (returns, arguments,
  // class attributes); once a round learns nothing new the facts are final.
  for (int round = 0; round < kMaxRounds; ++round) {
    next_ = learnt_;
    std::fill(next_.returns.begin(), next_.returns.end(), 0);
    for (auto& e : next_.return_elements) e.clear();
    for (std::size_t i = 0; i < n; ++i) analyze_scope(i);
    bool stable = next_ == learnt_;
    learnt_ = std::move(next_);
    if (disable_grad_in_private_functions()) stable = false;
    if (stable && round > 0) break;
  }
}

bool GraphFlow::disable_grad_in_private_functions() {
  // `_generate_speech(...)` called only from `@torch.no_grad() def generate(...)`:
  // a private function (leading underscore: not called from outside the file
  // by convention) runs with gradients off when every call of it in the file
  // does, and it is never passed as a value (`executor.submit(_work)`).
  // A def nested in a function is private the same way: only that function
  // can call it unless it hands it out as a value (fairseq pgslm's
  // `autoregressive_step_` inside `@torch.no_grad() def do_sampling`).
  std::unordered_map<std::string_view, bool> candidates;  // name -> may run with grad
  for (std::size_t i = 1; i < file_.scopes_.size(); ++i) {
    const Scope& scope = file_.scopes_[i];
    if (scope.grad_disabled || tree_.kind(scope.node) != NodeKind::kFunctionDefinition ||
        scope.name.size() < 2 || (scope.name[0] == '_' && scope.name[1] == '_')) {
      continue;
    }
    NodeId around = tree_.parent(scope.definition);
    bool nested =
        scope.class_node == kNoNode && around != kNoNode && file_.scope_index_of(around) != 0;
    if (scope.name[0] != '_' && !nested) continue;
    candidates.emplace(scope.name, false);
  }
  if (candidates.empty()) return false;
  if (!private_values_scanned_) {
    // Once per file: names used other than as a callee or a def's name.
    private_values_scanned_ = true;
    for (NodeId id = 0; id < tree_.size(); ++id) {
      if (tree_.kind(id) != NodeKind::kIdentifier) continue;
      auto it = candidates.find(tree_.text(id));
      if (it == candidates.end()) continue;
      NodeId expression = id;
      Field f = tree_.node(id).field;
      if (f == Field::kName) continue;  // def _name(...)
      if (f == Field::kAttributeName) expression = tree_.parent(id);
      NodeId parent = tree_.parent(expression);
      bool callee = parent != kNoNode && tree_.kind(parent) == NodeKind::kCall &&
                    tree_.node(expression).field == Field::kFunction;
      if (!callee) passed_as_value_.insert(std::string(tree_.text(id)));
    }
  }
  bool changed = false;
  for (std::size_t i = 1; i < file_.scopes_.size(); ++i) {
    Scope& scope = file_.scopes_[i];
    if (!candidates.count(scope.name) || passed_as_value_.count(scope.name)) continue;
    bool called = false;
    bool all_without_grad = true;
    for (NodeId call : file_.calls_named(scope.name)) {
      std::vector<std::size_t> targets = file_.callees_of(call);
      if (std::find(targets.begin(), targets.end(), i) == targets.end()) continue;
      called = true;
      if (!file_.grad_disabled_at(call)) all_without_grad = false;
    }
    if (called && all_without_grad) {
      scope.grad_disabled = true;
      changed = true;
    }
  }
  if (changed) {
    // What the earlier rounds recorded in those functions was walked with
    // gradients on; the next round records them again as they are.
    std::vector<StoreEvent> kept;
    store_index_.clear();
    for (const StoreEvent& e : file_.stores_) {
      if (file_.scopes_[e.scope].grad_disabled && e.grad_enabled) continue;
      store_index_.emplace(e.container != kNoNode ? e.container : e.site, kept.size());
      kept.push_back(e);
    }
    file_.stores_ = std::move(kept);
  }
  return changed;
}

FlowBits GraphFlow::strip_if_no_grad(FlowBits bits) const {
  return grad_enabled_ ? bits : static_cast<FlowBits>(bits & ~kCarriesGraph);
}

void GraphFlow::set(Env& env, const std::string& key, FlowBits bits) { env.assign(key, bits); }

void GraphFlow::join_with_checkpoint(Env& env, FlowEnvironment::Checkpoint at) {
  for (const auto& c : env.changes_since(at)) {
    env.restore(c.key, {c.before.bound || c.after.bound,
                        static_cast<FlowBits>(c.before.bits | c.after.bits)});
  }
}

void GraphFlow::analyze_scope(std::size_t index) {
  const Scope& scope = file_.scopes_[index];
  scope_ = index;
  grad_enabled_ = !scope.grad_disabled;
  loop_depth_ = 0;
  returned_ = 0;
  Env env;
  returned_elements_.clear();
  returns_only_tuples_ = true;
  collect_differentiated_names(index);
  // Mark the first parameters (after self) so stores can tell where a
  // value came from, and give them what the callers in this file pass.
  {
    std::size_t first = scope.class_node != kNoNode ? 1 : 0;
    const std::vector<FlowBits>& passed = learnt_.arguments[index];
    for (std::size_t p = first, bit = 0; p < scope.parameters.size(); ++p, ++bit) {
      FlowBits bits = p < passed.size() ? passed[p] : 0;
      if (bit < kTrackedParameters) bits |= static_cast<FlowBits>(kFirstParameterBit << bit);
      set(env, scope.parameters[p], bits);
    }
    // Attributes the class keeps tensors in, for every method.
    if (scope.class_node != kNoNode) {
      const ClassFacts* c = file_.class_facts(scope.class_node);
      if (c != nullptr) {
        std::string prefix = c->name + ".";
        for (const auto& [key, bits] : learnt_.class_attributes) {
          if (key.rfind(prefix, 0) == 0) env.add("self." + key.substr(prefix.size()), bits);
        }
      }
    }
  }
  if (file_.is_hook_scope(index)) {
    // hook(module, input, output) / hook(grad): the tensors it is handed.
    std::size_t first = scope.class_node != kNoNode ? 1 : 0;  // skip self
    std::size_t count = scope.parameters.size();
    if (count > first + 1) ++first;  // skip the module argument
    for (std::size_t p = first; p < count; ++p) env.add(scope.parameters[p], kDeviceTensor);
  }
  // Lightning's batch-end hooks are handed the step's outputs on the device
  // (their documented signatures).
  if (std::size_t outputs = lightning_outputs_parameter(file_, index);
      outputs < scope.parameters.size()) {
    env.add(scope.parameters[outputs], kDeviceTensor | kNonScalar);
  }
  if (scope.node == tree_.root()) {
    walk_block(tree_.root(), env);
  } else if (tree_.kind(scope.node) == NodeKind::kLambda) {
    returned_ |= eval(scope.body, env);
    returns_only_tuples_ = false;
  } else if (scope.body != kNoNode) {
    walk_block(scope.body, env);
  }
  next_.returns[index] |= returned_;
  if (returns_only_tuples_ && !returned_elements_.empty()) {
    next_.return_elements[index] = returned_elements_;
  }
}

void GraphFlow::collect_differentiated_names(std::size_t index) {
  // `loss.backward()`, `out["loss"].backward()`, `autograd.backward(loss)`,
  // `accelerator.backward(loss)`, `scaler.scale(loss).backward()`: the root
  // name of what is differentiated holds a tensor with a graph.
  differentiated_.clear();
  differentiated_elements_.clear();
  const Scope& scope = file_.scopes_[index];
  NodeId root = scope.node;
  NodeId end = tree_.node(root).subtree_end;
  auto root_name = [&](NodeId e) {
    for (int guard = 0; e != kNoNode && guard < 16; ++guard) {
      NodeKind k = tree_.kind(e);
      if (k == NodeKind::kIdentifier) return std::string(tree_.text(e));
      if (k == NodeKind::kSubscript) {
        e = tree_.child_by_field(e, Field::kValue);
      } else if (k == NodeKind::kParenthesizedExpression) {
        e = tree_.first_named_child(e);
      } else if (k == NodeKind::kCall && file_.callee_last_name(e) == "scale") {
        std::vector<NodeId> a = file_.positional_arguments(e);
        e = a.empty() ? kNoNode : a.front();
      } else if (k == NodeKind::kAttribute) {
        std::string d = dotted_text(tree_, e);
        return d;
      } else {
        return std::string();
      }
    }
    return std::string();
  };
  for (NodeId id = root; id < end; ++id) {
    if (tree_.kind(id) != NodeKind::kCall || file_.scope_index_of(id) != index) continue;
    if (!file_.is_backward_call(id)) continue;
    NodeId target = kNoNode;
    NodeId receiver = file_.method_receiver(id);
    if (file_.callee_last_name(id) == "backward" && receiver != kNoNode &&
        file_.qualified_name(file_.callee(id)) != "torch.autograd.backward" &&
        !vocabulary::is_accelerator_name(dotted_text(tree_, receiver))) {
      target = receiver;
    } else {
      std::vector<NodeId> args = file_.positional_arguments(id);
      if (!args.empty()) target = args.front();
    }
    // `losses[i - 1].backward()`: the container's elements carry graphs,
    // so a value stored into it is one (the evidence goes into the message).
    NodeId element = target;
    while (element != kNoNode && tree_.kind(element) == NodeKind::kParenthesizedExpression) {
      element = tree_.first_named_child(element);
    }
    if (element != kNoNode && tree_.kind(element) == NodeKind::kSubscript) {
      std::string holder = dotted_text(tree_, tree_.child_by_field(element, Field::kValue));
      if (!holder.empty() && holder != "self") differentiated_elements_.emplace(holder, id);
    }
    std::string name = root_name(target);
    if (name.empty() || name == "self") continue;
    // The value differentiated is the one bound last before the call.
    NodeId last = kNoNode;
    for (NodeId a : file_.assignments_to(name)) {
      if (a >= id) break;
      if (file_.scope_index_of(a) == index) last = a;
    }
    // `losses, rewards = self.flowmatch_loss(...)`; `losses[0].backward()`:
    // bound by unpacking, which marks `losses` and not `rewards`.
    if (last == kNoNode) last = last_unpacking_of(name, id, index);
    if (last == kNoNode) continue;
    differentiated_.emplace_back(last, name);
    // `loss = sum(losses) if isinstance(losses, tuple) else losses`,
    // `loss = functools.reduce(operator.add, losses)`: what is summed into
    // the differentiated value holds the graph too.
    for (const std::string& source : summed_sources(tree_.child_by_field(last, Field::kRight))) {
      NodeId bound = file_.last_assignment_before(source, last, index);
      if (bound != kNoNode) differentiated_.emplace_back(bound, source);
    }
  }
}

NodeId GraphFlow::last_unpacking_of(const std::string& name, NodeId before,
                                    std::size_t index) const {
  NodeId root = file_.scopes_[index].node;
  for (NodeId a = before; a > root;) {
    --a;
    if (tree_.kind(a) != NodeKind::kAssignment || file_.scope_index_of(a) != index) continue;
    NodeId left = tree_.child_by_field(a, Field::kLeft);
    if (left == kNoNode || tree_.kind(left) == NodeKind::kIdentifier) continue;
    for (NodeId bound : bound_targets(tree_, left)) {
      if (tree_.kind(bound) == NodeKind::kIdentifier && tree_.text(bound) == name) return a;
    }
  }
  return kNoNode;
}

std::vector<std::string> GraphFlow::summed_sources(NodeId value) const {
  // Names whose whole value is folded into `value`: the value itself, the
  // branches of a conditional, `sum(x)`, `functools.reduce(f, x)`,
  // `torch.stack(x).sum()`. Not the operands of arithmetic (`a + 0.1 * b`:
  // `b` may be a float).
  std::vector<std::string> out;
  std::vector<NodeId> pending{value};
  for (int guard = 0; !pending.empty() && guard < 8; ++guard) {
    NodeId e = pending.back();
    pending.pop_back();
    if (e == kNoNode) continue;
    switch (tree_.kind(e)) {
      case NodeKind::kIdentifier:
        out.emplace_back(tree_.text(e));
        break;
      case NodeKind::kParenthesizedExpression:
        pending.push_back(tree_.first_named_child(e));
        break;
      case NodeKind::kConditionalExpression: {
        std::vector<NodeId> parts = tree_.named_children(e);
        if (parts.size() == 3) {
          pending.push_back(parts[0]);
          pending.push_back(parts[2]);
        }
        break;
      }
      case NodeKind::kCall: {
        std::string q = file_.qualified_name(file_.callee(e));
        std::string_view last = vocabulary::last_component(q);
        std::vector<NodeId> args = file_.positional_arguments(e);
        NodeId receiver = file_.method_receiver(e);
        if ((q == "sum" || q == "torch.stack" || q == "torch.cat") && !args.empty()) {
          pending.push_back(args.front());
        } else if (last == "reduce" && args.size() >= 2) {
          pending.push_back(args[1]);
        } else if (receiver != kNoNode && (last == "sum" || last == "mean")) {
          pending.push_back(receiver);
        }
        break;
      }
      default:
        break;
    }
  }
  return out;
}

std::string GraphFlow::class_attribute_key(const std::string& dotted) const {
  // Only `self.name`, in a method.
  if (dotted.rfind("self.", 0) != 0 || dotted.find('.', 5) != std::string::npos) return {};
  const Scope& scope = file_.scopes_[scope_];
  if (scope.class_node == kNoNode) return {};
  const ClassFacts* c = file_.class_facts(scope.class_node);
  return c != nullptr ? c->name + "." + dotted.substr(5) : std::string();
}

FlowBits GraphFlow::captured_bits(NodeId function, const Env& env) const {
  if (env.empty() || function + 1 >= tree_.node(function).subtree_end) return 0;
  const Scope& inner = file_.scopes_[file_.scope_index_of(function + 1)];
  if (inner.node != function) return 0;
  auto own = [&](std::string_view name) {
    for (const auto& p : inner.parameters) {
      if (p == name) return true;
    }
    return inner.assigned.count(std::string(name)) != 0;
  };
  FlowBits bits = 0;
  for (NodeId id = function + 1; id < tree_.node(function).subtree_end; ++id) {
    if (tree_.kind(id) != NodeKind::kIdentifier) continue;
    Field f = tree_.node(id).field;
    if (f == Field::kAttributeName || f == Field::kName || f == Field::kParametersField) continue;
    std::string_view name = tree_.text(id);
    if (name == "self" || own(name)) continue;
    bits |= env.get(std::string(name)) & kTensorFacts;
  }
  return bits;
}

}  // namespace gpuleak::lint
