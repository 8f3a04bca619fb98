// GraphFlow evaluating expressions: what each operator, literal, container,
// comprehension, attribute and lambda carries (calls: graph_flow_calls.cpp).
#include "graph_flow.h"
#include "graph_flow_shared.h"

namespace gpuleak::lint {

using namespace graph_flow;

FlowBits GraphFlow::eval(NodeId e, Env& env) {
  if (e == kNoNode) return 0;
  FlowBits r = 0;
  switch (tree_.kind(e)) {
    case NodeKind::kIdentifier: {
      r = env.get(std::string(tree_.text(e)));
      break;
    }
    case NodeKind::kAttribute:
      r = eval_attribute(e, env);
      break;
    case NodeKind::kSubscript: {
      r = eval(tree_.child_by_field(e, Field::kValue), env);
      // sys.exc_info()[0] is the exception's type: it holds no frames.
      NodeId index = tree_.child_by_field(e, Field::kSubscriptIndex);
      if ((r & kException) && index != kNoNode && tree_.text(index) == "0") {
        r = static_cast<FlowBits>(r & ~kException);
      }
      for (NodeId c = tree_.first_child(e); c != kNoNode; c = tree_.next_sibling(c)) {
        if (tree_.node(c).field == Field::kSubscriptIndex) eval(c, env);
      }
      break;
    }
    case NodeKind::kCall:
      r = eval_call(e, env);
      break;
    case NodeKind::kBinaryOperator: {
      FlowBits left = as_operand(eval(tree_.child_by_field(e, Field::kLeft), env));
      FlowBits right = as_operand(eval(tree_.child_by_field(e, Field::kRight), env));
      NodeId l = tree_.child_by_field(e, Field::kLeft);
      // "%s" % loss formats a string.
      if (l != kNoNode && tree_.kind(l) == NodeKind::kString) {
        r = 0;
      } else {
        // Arithmetic passes tensors on, and which parameters they came from.
        r = strip_if_no_grad(
            static_cast<FlowBits>((left | right) & (kTensorFacts | kParameterBits)));
      }
      break;
    }
    case NodeKind::kUnaryOperator:
      r = strip_if_no_grad(as_operand(eval(tree_.first_named_child(e), env)) &
                           (kTensorFacts | kParameterBits));
      break;
    case NodeKind::kBooleanOperator:
      r = static_cast<FlowBits>(eval(tree_.child_by_field(e, Field::kLeft), env) |
                                eval(tree_.child_by_field(e, Field::kRight), env));
      break;
    case NodeKind::kNotOperator:
      eval(tree_.first_named_child(e), env);
      break;
    case NodeKind::kComparisonOperator: {
      FlowBits all = 0;
      for (NodeId c : tree_.named_children(e)) all |= eval(c, env);
      r = all & kDeviceTensor;  // a bool tensor has no graph
      break;
    }
    case NodeKind::kConditionalExpression: {
      std::vector<NodeId> parts = tree_.named_children(e);
      // `x.item() if isinstance(x, torch.Tensor) else x`: the else part is no tensor.
      std::optional<TensorTest> test =
          parts.size() == 3 ? tensor_test(parts[1]) : std::optional<TensorTest>();
      for (std::size_t i = 0; i < parts.size(); ++i) {
        FlowBits b = 0;
        if (test &&
            ((i == 0 && test->true_means_not_tensor) || (i == 2 && !test->true_means_not_tensor))) {
          FlowEnvironment::Checkpoint before = env.open();
          env.erase(test->name);
          b = eval(parts[i], env);
          env.rollback_to(before);
          env.close(before);
        } else {
          b = eval(parts[i], env);
        }
        if (i != 1) r |= b;  // [then, condition, else]
      }
      break;
    }
    case NodeKind::kParenthesizedExpression:
    case NodeKind::kKeywordArgument:
    case NodeKind::kListSplat:
    case NodeKind::kDictionarySplat:
    case NodeKind::kAwait: {
      NodeId inner = tree_.kind(e) == NodeKind::kKeywordArgument
                         ? tree_.child_by_field(e, Field::kValue)
                         : tree_.first_named_child(e);
      r = eval(inner, env);
      break;
    }
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kSet:
    case NodeKind::kExpressionList:
      for (NodeId c : tree_.named_children(e)) r |= eval(c, env);
      r &= ~kRequiresGradLeaf;  // a list of leaves is no leaf
      break;
    case NodeKind::kDictionary:
      for (NodeId c : tree_.named_children(e)) {
        if (tree_.kind(c) == NodeKind::kPair) {
          eval(tree_.child_by_field(c, Field::kKey), env);
          r |= eval(tree_.child_by_field(c, Field::kValue), env);
          file_.bits_[c] = r;
        } else {
          r |= eval(c, env);
        }
      }
      r &= ~kRequiresGradLeaf;
      break;
    case NodeKind::kListComprehension:
    case NodeKind::kSetComprehension:
    case NodeKind::kGeneratorExpression:
    case NodeKind::kDictionaryComprehension:
      r = eval_comprehension(e, env);
      break;
    case NodeKind::kNamedExpression: {
      r = eval(tree_.child_by_field(e, Field::kValue), env);
      NodeId name = tree_.child_by_field(e, Field::kName);
      if (name != kNoNode) set(env, std::string(tree_.text(name)), r);
      break;
    }
    case NodeKind::kLambda:
      // A lambda holds what it captures: the closure keeps those tensors.
      r = captured_bits(e, env);
      break;
    case NodeKind::kString:
    case NodeKind::kConcatenatedString:
    case NodeKind::kInteger:
    case NodeKind::kFloat:
    case NodeKind::kTrue:
    case NodeKind::kFalse:
    case NodeKind::kNone:
    case NodeKind::kComment:
      break;
    default:
      for (NodeId c : tree_.named_children(e)) eval(c, env);
      break;
  }
  file_.bits_[e] = r;
  file_.grad_disabled_[e] = grad_enabled_ ? 0 : 1;
  return r;
}

FlowBits GraphFlow::eval_comprehension(NodeId e, Env& env) {
  std::vector<NodeId> parts = tree_.named_children(e);
  if (parts.empty()) return 0;
  // The comprehension's own names stay inside it: undone at the end.
  FlowEnvironment::Checkpoint outside = env.open();
  Env& inner = env;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    NodeId part = parts[i];
    if (tree_.kind(part) == NodeKind::kForInClause) {
      NodeId right = tree_.child_by_field(part, Field::kRight);
      FlowBits iterated = eval(right, inner);
      bind_loop_targets(tree_.child_by_field(part, Field::kLeft), right, iterated, inner);
    } else {
      eval(part, inner);
    }
  }
  NodeId body = parts[0];
  FlowBits v = 0;
  if (tree_.kind(body) == NodeKind::kPair) {
    eval(tree_.child_by_field(body, Field::kKey), inner);
    v = eval(tree_.child_by_field(body, Field::kValue), inner);
    file_.bits_[body] = v;
  } else {
    v = eval(body, inner);
  }
  env.rollback_to(outside);
  env.close(outside);
  return v;
}

namespace {

bool names_a_count(std::string_view name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  return ends_with("_size") || ends_with("_count") || name.starts_with("num_") ||
         name.starts_with("n_") ||
         one_of(name, {"count", "epoch", "global_step", "current_epoch", "iteration"});
}

}  // namespace

FlowBits GraphFlow::eval_attribute(NodeId e, Env& env) {
  FlowBits object = eval(tree_.child_by_field(e, Field::kObject), env);
  std::string key = dotted_text(tree_, e);
  if (!key.empty()) {
    if (const FlowBits* bits = env.find(key)) return *bits;
  }
  NodeId attr = tree_.child_by_field(e, Field::kAttributeName);
  std::string_view name = attr != kNoNode ? tree_.text(attr) : std::string_view();
  if (one_of(name, {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf",
                    "layout", "names", "is_sparse", "itemsize", "nbytes"})) {
    return 0;
  }
  // `report.batch_size`, `meter.count`, `state.num_samples`: counters an
  // object keeps beside its tensors are Python ints by convention.
  if (names_a_count(name)) return 0;
  if (name == "data") return object & kDeviceTensor;
  if (name == "grad") return kDeviceTensor;  // gradients live where their parameters do
  if (one_of(name, {"__traceback__", "tb_frame", "tb_next", "__context__", "__cause__"})) {
    return object & kException;
  }
  if (object & kException) return 0;  // e.args, e.errno: plain values
  return object;
}

}  // namespace gpuleak::lint
