// GraphFlow binding values to targets: names, attributes (and what a class
// keeps in them), subscripts, unpacking (pairwise or through a same-file
// function's tuple summary), augmented assignment and `c = c + v`.
#include <algorithm>

#include "graph_flow.h"
#include "graph_flow_shared.h"
#include "vocabulary.h"

namespace gpuleak::lint {

using namespace graph_flow;

void GraphFlow::walk_assignment(NodeId assignment, Env& env) {
  std::vector<NodeId> targets;
  NodeId value = assignment;
  // a = b = value: collect every target of the chain.
  while (value != kNoNode && tree_.kind(value) == NodeKind::kAssignment) {
    NodeId left = tree_.child_by_field(value, Field::kLeft);
    if (left != kNoNode) targets.push_back(left);
    value = tree_.child_by_field(value, Field::kRight);
  }
  if (value == kNoNode) return;  // annotation only: `x: int`
  if (tree_.kind(value) == NodeKind::kAugmentedAssignment) {
    walk_augmented(value, env);
    return;
  }
  FlowBits bits = eval(value, env);
  for (NodeId target : targets) {
    if (targets.size() == 1) {
      FlowBits other_bits = 0;
      NodeId other = self_update_operand(target, value, other_bits);
      // A slot concatenated with tensors without a graph is bounded by the
      // object that holds it, which the analysis does not follow; one with
      // a graph chains every update's graph whatever the object's life.
      bool slot = tree_.kind(target) == NodeKind::kSubscript;
      if (other != kNoNode && (!slot || (other_bits & kCarriesGraph))) {
        record_store(StoreKind::kSelfUpdate, assignment, target, kNoNode, other, other_bits);
        if (tree_.kind(target) == NodeKind::kSubscript) {
          std::string holder = dotted_text(tree_, tree_.child_by_field(target, Field::kValue));
          if (!holder.empty()) env.add(holder, bits);
        } else {
          set(env, dotted_text(tree_, target), bits);
        }
        continue;
      }
    }
    assign_target(target, value, bits, env, assignment);
  }
}

void GraphFlow::walk_augmented(NodeId assignment, Env& env) {
  NodeId left = tree_.child_by_field(assignment, Field::kLeft);
  NodeId right = tree_.child_by_field(assignment, Field::kRight);
  if (left == kNoNode || right == kNoNode) return;
  FlowBits right_bits = eval(right, env);
  FlowBits left_bits = eval(left, env);
  NodeKind rk = tree_.kind(right);
  bool list_like =
      rk == NodeKind::kList || rk == NodeKind::kTuple || rk == NodeKind::kListComprehension;
  // `total += loss` under no_grad computes a new value without a graph;
  // `outputs += [out]` keeps the very objects, graph and all.
  FlowBits effective = list_like ? right_bits : strip_if_no_grad(right_bits);
  if (tree_.kind(left) == NodeKind::kSubscript) {
    record_store(StoreKind::kSubscriptAugmented, assignment,
                 tree_.child_by_field(left, Field::kValue),
                 tree_.child_by_field(left, Field::kSubscriptIndex), right, effective);
  } else {
    record_store(StoreKind::kAugmented, assignment, left, kNoNode, right, effective);
  }
  set(env, dotted_text(tree_, left), static_cast<FlowBits>(left_bits | effective));
}

void GraphFlow::bind_pattern(NodeId target, FlowBits bits, Env& env) {
  for (NodeId name : bound_targets(tree_, target)) set(env, dotted_text(tree_, name), bits);
}

void GraphFlow::bind_loop_targets(NodeId target, NodeId iterable, FlowBits bits, Env& env) {
  // `for i, out in enumerate(outputs)`: the first name counts, it is an int.
  // `for step, loss in history.items()`: the first is a key (a step number,
  // a name); the values are what the dict was filled with.
  if (target != kNoNode && iterable != kNoNode && tree_.kind(iterable) == NodeKind::kCall &&
      (file_.qualified_name(file_.callee(iterable)) == "enumerate" ||
       (file_.callee_last_name(iterable) == "items" && file_.method_receiver(iterable) != kNoNode &&
        file_.positional_arguments(iterable).empty()))) {
    NodeKind k = tree_.kind(target);
    if (k == NodeKind::kPatternList || k == NodeKind::kTuplePattern || k == NodeKind::kTuple ||
        k == NodeKind::kExpressionList) {
      std::vector<NodeId> parts = tree_.named_children(target);
      if (parts.size() == 2) {
        bind_pattern(parts[0], 0, env);
        bind_pattern(parts[1], bits, env);
        return;
      }
    }
  }
  bind_pattern(target, bits, env);
}

void GraphFlow::assign_target(NodeId target, NodeId value, FlowBits bits, Env& env, NodeId site) {
  if (target == kNoNode) return;
  switch (tree_.kind(target)) {
    case NodeKind::kIdentifier: {
      std::string name(tree_.text(target));
      const Scope& scope = file_.scopes_[scope_];
      // Whatever produced it, a name this function differentiates holds a
      // tensor with a graph (`total = sum(losses); total.backward()`).
      if (grad_enabled_ && !(bits & kCarriesGraph) && !(bits & kException) &&
          std::find(differentiated_.begin(), differentiated_.end(), std::make_pair(site, name)) !=
              differentiated_.end()) {
        bits |= kTensorBits;
      }
      if (scope_ != 0 && scope.declared_global.count(name)) {
        if (bits != 0) record_store(StoreKind::kGlobalName, site, target, kNoNode, value, bits);
      } else if (bits & kException) {
        record_store(StoreKind::kLocalName, site, target, kNoNode, value, bits);
      }
      set(env, name, bits);
      file_.bits_[target] = bits;
      return;
    }
    case NodeKind::kAttribute: {
      eval(tree_.child_by_field(target, Field::kObject), env);
      if (bits != 0) record_store(StoreKind::kAttribute, site, target, kNoNode, value, bits);
      std::string dotted = dotted_text(tree_, target);
      set(env, dotted, bits);
      file_.bits_[target] = bits;
      // `self.probe = nn.Parameter(... device="cuda")`: every method of the
      // class sees a GPU tensor there (not a graph: that is per call).
      std::string key = class_attribute_key(dotted);
      if (!key.empty() && (bits & kDeviceTensor)) {
        next_.class_attributes[key] |= bits & (kDeviceTensor | kNonScalar);
      }
      return;
    }
    case NodeKind::kSubscript: {
      NodeId container = tree_.child_by_field(target, Field::kValue);
      NodeId key = tree_.child_by_field(target, Field::kSubscriptIndex);
      eval(container, env);
      if (key != kNoNode) eval(key, env);
      record_store(StoreKind::kSubscript, site, container, key, value, bits);
      record_stores_through_setitem(site, container, value, bits);
      std::string holder = dotted_text(tree_, container);
      if (!holder.empty()) env.add(holder, bits & ~kRequiresGradLeaf);
      return;
    }
    case NodeKind::kListSplatPattern:
    case NodeKind::kListSplat: {
      NodeId inner = tree_.first_named_child(target);
      if (inner != kNoNode) assign_target(inner, value, bits, env, site);
      return;
    }
    default:
      if (is_unpacking_target(tree_.kind(target))) assign_elements(target, value, bits, env, site);
      return;
  }
}

// `a, b = value`: each element gets its part of the value when the value is a
// tuple of as many, else what a function of this file returns in that place,
// else the value's facts.
void GraphFlow::assign_elements(NodeId target, NodeId value, FlowBits bits, Env& env, NodeId site) {
  std::vector<NodeId> elements = tree_.named_children(target);
  std::vector<NodeId> values;
  if (value != kNoNode) {
    NodeKind vk = tree_.kind(value);
    if (vk == NodeKind::kTuple || vk == NodeKind::kExpressionList || vk == NodeKind::kList ||
        vk == NodeKind::kPatternList) {
      values = tree_.named_children(value);
    }
  }
  bool pairwise = values.size() == elements.size();
  std::vector<FlowBits> from_summary;
  if (!pairwise && value != kNoNode && tree_.kind(value) == NodeKind::kCall) {
    from_summary = same_file_return_elements(value, elements.size());
  } else if (!pairwise && value != kNoNode && tree_.kind(value) == NodeKind::kIdentifier) {
    // `result = step(...)` then `loss, report, n, state = result`: the
    // tuple's elements keep the facts the function's summary gives each,
    // so the batch size `n` is no graph because the loss is one.
    NodeId bound = file_.last_assignment_before(tree_.text(value), site, scope_);
    NodeId call = bound != kNoNode ? tree_.child_by_field(bound, Field::kRight) : kNoNode;
    if (call != kNoNode && tree_.kind(call) == NodeKind::kCall) {
      from_summary = same_file_return_elements(call, elements.size());
    }
  }
  // `out, _, ratio = model(data)` with `model = Net(...)` of this file:
  // Net.forward shows which elements are Python numbers (pytorch_geometric's
  // pooling ratio, `out.size(0) / x.size(0)`).
  std::vector<bool> numbers(elements.size(), false);
  if (!pairwise && from_summary.empty() && value != kNoNode &&
      tree_.kind(value) == NodeKind::kCall) {
    std::vector<std::size_t> forwards = forward_of_instance_called(value);
    for (std::size_t i = 0; i < elements.size() && !forwards.empty(); ++i) {
      numbers[i] = std::all_of(forwards.begin(), forwards.end(), [&](std::size_t s) {
        return forward_returns_python_number(s, i, elements.size());
      });
    }
  }
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (numbers[i]) {
      assign_target(elements[i], value, static_cast<FlowBits>(bits & ~kTensorFacts), env, site);
      continue;
    }
    if (pairwise) {
      assign_target(elements[i], values[i], file_.bits_[values[i]], env, site);
    } else if (!from_summary.empty()) {
      assign_target(elements[i], value, strip_if_no_grad(from_summary[i]), env, site);
    } else if (i > 0 && opaque_element_without_evidence(elements[i])) {
      // `loss, costs[i], ... = self.total_loss(...)`: all that is known
      // of a tuple from elsewhere is that something in it is a tensor
      // (by convention the loss, first). A later element stored into a
      // container is taken for one only on evidence from its uses.
      assign_target(elements[i], value, static_cast<FlowBits>(bits & ~kTensorFacts), env, site);
    } else if (i > 0 && criterion_running_the_model(value) &&
               opaque_name_without_graph_evidence(elements[i])) {
      // `loss, sample_size, logging_output = criterion(model, sample)`
      // (fairseq's criterion interface): the graph is the loss's, first;
      // the sample size is a count and the logging output holds
      // `loss.data` and numbers. A later name carries one only on
      // evidence of its own. (A loss of predictions, `loss, parts =
      // loss_fn(preds, y)`, or a model's `loss, stats = actor(data)`, may
      // well return graphs in its parts, and keeps them.)
      assign_target(elements[i], value, static_cast<FlowBits>(bits & ~kCarriesGraph), env, site);
    } else {
      assign_target(elements[i], value, bits, env, site);
    }
  }
}

NodeId GraphFlow::self_update_operand(NodeId target, NodeId value, FlowBits& other_bits) const {
  std::string self = dotted_text(tree_, target);
  // `self[key] = torch.cat((self[key], report[key]))`: a slot updated from
  // itself, compared by its text.
  if (self.empty() && tree_.kind(target) == NodeKind::kSubscript) self = tree_.text(target);
  if (self.empty()) return kNoNode;
  while (tree_.kind(value) == NodeKind::kParenthesizedExpression) {
    value = tree_.first_named_child(value);
    if (value == kNoNode) return kNoNode;
  }
  if (tree_.kind(value) == NodeKind::kConditionalExpression) {
    // `hist = out if hist is None else torch.cat([hist, out])`: a branch
    // that updates the value from itself makes the statement a self-update.
    std::vector<NodeId> parts = tree_.named_children(value);
    if (parts.size() != 3) return kNoNode;
    for (NodeId branch : {parts[0], parts[2]}) {
      FlowBits bits = 0;
      NodeId other = self_update_operand(target, branch, bits);
      if (other != kNoNode) {
        other_bits |= bits;
        return other;
      }
    }
    return kNoNode;
  }
  std::vector<NodeId> operands;
  if (tree_.kind(value) == NodeKind::kBinaryOperator) {
    // Flatten `total + a + b` into its operands.
    std::vector<NodeId> stack{value};
    while (!stack.empty()) {
      NodeId n = stack.back();
      stack.pop_back();
      if (tree_.kind(n) == NodeKind::kBinaryOperator) {
        NodeId op = tree_.child_by_field(n, Field::kOperator);
        std::string_view o = op != kNoNode ? tree_.text(op) : std::string_view();
        if (o != "+" && o != "-" && o != "*" && o != "/") return kNoNode;
        stack.push_back(tree_.child_by_field(n, Field::kRight));
        stack.push_back(tree_.child_by_field(n, Field::kLeft));
      } else if (n != kNoNode) {
        operands.push_back(n);
      }
    }
  } else if (tree_.kind(value) == NodeKind::kCall) {
    std::string qualified = file_.qualified_name(file_.callee(value));
    std::string_view last = vocabulary::last_component(qualified);
    if (!one_of(last, {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "add"})) {
      return kNoNode;
    }
    std::vector<NodeId> args = file_.positional_arguments(value);
    if (args.empty()) return kNoNode;
    NodeKind k0 = tree_.kind(args[0]);
    if (k0 == NodeKind::kList || k0 == NodeKind::kTuple) {
      operands = tree_.named_children(args[0]);
    } else {
      operands = args;
    }
  } else {
    return kNoNode;
  }
  bool has_self = false;
  bool has_part_of_self = false;
  NodeId other = kNoNode;
  for (NodeId o : operands) {
    if (dotted_text(tree_, o) == self || tree_.text(o) == self) {
      has_self = true;
    } else if (tree_.kind(o) == NodeKind::kSubscript &&
               dotted_text(tree_, tree_.child_by_field(o, Field::kValue)) == self) {
      has_part_of_self = true;  // `window[-n:]`
    } else {
      other_bits |= file_.bits_[o];
      if (other == kNoNode) other = o;
    }
  }
  // `window = torch.cat([window[-n:], v])` keeps n + 1 values, but a slice
  // of a tensor is a view with the graph of the whole: with a v that carries
  // a graph every update chains the previous one's, so the graphs of all
  // steps stay (botorch's stopping-criterion window).
  if (!has_self && has_part_of_self && (other_bits & kCarriesGraph)) return other;
  return has_self ? other : kNoNode;
}

bool GraphFlow::opaque_element_without_evidence(NodeId element) {
  NodeKind k = tree_.kind(element);
  if (k != NodeKind::kSubscript && k != NodeKind::kAttribute) return false;
  NodeId holder =
      k == NodeKind::kSubscript ? tree_.child_by_field(element, Field::kValue) : element;
  std::string path = dotted_text(tree_, holder);
  if (path.empty() || path == "self") return false;
  auto key = std::to_string(scope_) + ":" + path;
  auto memo = used_as_tensor_.find(key);
  if (memo != used_as_tensor_.end()) return !memo->second;
  // Evidence: a tensor-only method called on the container's elements (or
  // the attribute) anywhere in the function: `losses[i - 1].backward()`,
  // `costs[i].item()`.
  bool evidence = false;
  // A closure's containers belong to the function around it: search there.
  NodeId region = file_.scopes_[scope_].node;
  for (int hops = 0; hops < 4 && region != tree_.root(); ++hops) {
    NodeId parent = tree_.parent(file_.scopes_[file_.scope_index_of(region)].definition);
    std::size_t outer = parent != kNoNode ? file_.scope_index_of(parent) : 0;
    if (outer == 0) break;
    region = file_.scopes_[outer].node;
  }
  NodeId end = tree_.node(region).subtree_end;
  for (NodeId id = region; id < end && !evidence; ++id) {
    if (tree_.kind(id) != NodeKind::kCall) continue;
    NodeId receiver = file_.method_receiver(id);
    if (receiver == kNoNode) continue;
    std::string_view m = file_.callee_last_name(id);
    if (!one_of(m, {"backward", "item", "detach", "cpu", "cuda", "numpy", "tolist", "size", "dim",
                    "requires_grad_"})) {
      continue;
    }
    NodeId r = receiver;
    if (tree_.kind(r) == NodeKind::kSubscript) r = tree_.child_by_field(r, Field::kValue);
    evidence = dotted_text(tree_, r) == path;
  }
  used_as_tensor_.emplace(key, evidence);
  return !evidence;
}

bool GraphFlow::criterion_running_the_model(NodeId call) const {
  if (tree_.kind(call) != NodeKind::kCall || !file_.is_loss_callee(call)) return false;
  for (NodeId a : file_.positional_arguments(call)) {
    std::string d = dotted_text(tree_, a);
    if (!d.empty() && vocabulary::is_model_name(vocabulary::last_component(d))) return true;
  }
  return false;
}

bool GraphFlow::opaque_name_without_graph_evidence(NodeId element) {
  if (tree_.kind(element) != NodeKind::kIdentifier) return false;
  std::string name(tree_.text(element));
  auto key = std::to_string(scope_) + ":name:" + name;
  auto memo = used_as_tensor_.find(key);
  if (memo != used_as_tensor_.end()) return !memo->second;
  auto mentions_name = [&](NodeId expression) {
    if (expression == kNoNode) return false;
    for (NodeId id = expression; id < tree_.node(expression).subtree_end; ++id) {
      if (tree_.kind(id) == NodeKind::kIdentifier && tree_.text(id) == name) {
        // `name` itself, not the attribute `x.name` of something else.
        NodeId parent = tree_.parent(id);
        if (parent != kNoNode && tree_.kind(parent) == NodeKind::kAttribute &&
            tree_.node(id).field != Field::kObject) {
          continue;
        }
        return true;
      }
    }
    return false;
  };
  // Evidence, anywhere in the function: a tensor method called on it
  // (`aux.backward()`, `logits.argmax()`, `(loss + aux).backward()`), or
  // it handed to a backward, loss, model or torch call.
  bool evidence = false;
  NodeId region = file_.scopes_[scope_].node;
  NodeId end = tree_.node(region).subtree_end;
  for (NodeId id = region; id < end && !evidence; ++id) {
    if (tree_.kind(id) != NodeKind::kCall || file_.scope_index_of(id) != scope_) continue;
    NodeId receiver = file_.method_receiver(id);
    std::string_view m = file_.callee_last_name(id);
    if (receiver != kNoNode &&
        one_of(m, {"backward", "item",    "detach",      "cpu",     "cuda",
                   "numpy",    "tolist",  "size",        "dim",     "requires_grad_",
                   "argmax",   "softmax", "log_softmax", "sigmoid", "view",
                   "reshape",  "squeeze", "unsqueeze",   "mean",    "sum",
                   "float"}) &&
        mentions_name(receiver)) {
      evidence = true;
      break;
    }
    std::string qualified = file_.qualified_name(file_.callee(id));
    bool tensor_call = file_.is_backward_call(id) || file_.is_loss_callee(id) ||
                       file_.is_model_call(id) || qualified.starts_with("torch.");
    if (!tensor_call) continue;
    NodeId args = tree_.child_by_field(id, Field::kArguments);
    evidence = mentions_name(args);
  }
  used_as_tensor_.emplace(key, evidence);
  return !evidence;
}

}  // namespace gpuleak::lint
