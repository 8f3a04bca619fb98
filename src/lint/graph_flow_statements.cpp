// GraphFlow walking statements: blocks, branches merged by union, loops
// walked again with what they carry, try/except, with (gradient modes),
// match, and what an isinstance/None test says about a name.
#include "graph_flow.h"
#include "graph_flow_shared.h"
#include "vocabulary.h"

namespace gpuleak::lint {

using namespace graph_flow;

void GraphFlow::walk_block(NodeId block, Env& env) {
  for (NodeId s = tree_.first_child(block); s != kNoNode; s = tree_.next_sibling(s)) {
    if (!tree_.node(s).named || tree_.kind(s) == NodeKind::kComment) continue;
    walk_statement(s, env);
  }
}

void GraphFlow::walk_statement(NodeId statement, Env& env) {
  file_.grad_disabled_[statement] = grad_enabled_ ? 0 : 1;
  switch (tree_.kind(statement)) {
    case NodeKind::kExpressionStatement:
      for (NodeId part : tree_.named_children(statement)) {
        if (tree_.kind(part) == NodeKind::kAssignment) {
          walk_assignment(part, env);
        } else if (tree_.kind(part) == NodeKind::kAugmentedAssignment) {
          walk_augmented(part, env);
        } else {
          eval(part, env);
        }
      }
      return;
    case NodeKind::kReturnStatement: {
      NodeId value = tree_.first_named_child(statement);
      if (value != kNoNode) returned_ |= eval(value, env);
      // `return y_hat.detach(), loss.item()`: remember each element.
      NodeKind vk = value != kNoNode ? tree_.kind(value) : NodeKind::kNone;
      if (vk == NodeKind::kTuple || vk == NodeKind::kExpressionList) {
        std::vector<NodeId> parts = tree_.named_children(value);
        if (returned_elements_.empty()) returned_elements_.assign(parts.size(), 0);
        if (returned_elements_.size() != parts.size()) {
          returns_only_tuples_ = false;
        } else {
          for (std::size_t i = 0; i < parts.size(); ++i)
            returned_elements_[i] |= file_.bits_[parts[i]];
        }
      } else {
        returns_only_tuples_ = false;
      }
      return;
    }
    case NodeKind::kIfStatement:
      walk_if(statement, env);
      return;
    case NodeKind::kForStatement: {
      FlowBits iterated = eval(tree_.child_by_field(statement, Field::kRight), env);
      NodeId body = tree_.child_by_field(statement, Field::kBody);
      NodeId left = tree_.child_by_field(statement, Field::kLeft);
      // `for out in outputs`: elements of a list of carriers are carriers.
      FlowEnvironment::Checkpoint entry = env.open();
      bind_loop_targets(left, tree_.child_by_field(statement, Field::kRight), iterated, env);
      if (body != kNoNode) walk_loop_body(body, env);
      join_with_checkpoint(env, entry);
      env.close(entry);
      NodeId alternative = tree_.child_by_field(statement, Field::kAlternative);
      if (alternative != kNoNode) walk_block(alternative, env);
      return;
    }
    case NodeKind::kWhileStatement: {
      eval(tree_.child_by_field(statement, Field::kCondition), env);
      NodeId body = tree_.child_by_field(statement, Field::kBody);
      if (body != kNoNode) walk_loop_body(body, env);
      NodeId alternative = tree_.child_by_field(statement, Field::kAlternative);
      if (alternative != kNoNode) walk_block(alternative, env);
      return;
    }
    case NodeKind::kTryStatement:
      walk_try(statement, env);
      return;
    case NodeKind::kWithStatement:
      walk_with(statement, env);
      return;
    case NodeKind::kFunctionDefinition: {
      // A nested def is a closure over what it reads from this scope.
      NodeId name = tree_.child_by_field(statement, Field::kName);
      if (name != kNoNode) {
        FlowBits captured = scope_ != 0 ? captured_bits(statement, env) : 0;
        set(env, std::string(tree_.text(name)), captured);
      }
      return;
    }
    case NodeKind::kDecoratedDefinition: {
      NodeId def = tree_.child_by_field(statement, Field::kDefinition);
      if (def != kNoNode) walk_statement(def, env);
      return;
    }
    case NodeKind::kClassDefinition: {
      NodeId body = tree_.child_by_field(statement, Field::kBody);
      if (body != kNoNode) walk_block(body, env);
      return;
    }
    case NodeKind::kDeleteStatement:
      for (NodeId target : tree_.named_children(statement)) {
        std::vector<NodeId> targets{target};
        if (tree_.kind(target) == NodeKind::kExpressionList) targets = tree_.named_children(target);
        for (NodeId t : targets) env.erase(dotted_text(tree_, t));
      }
      return;
    case NodeKind::kMatchStatement: {
      FlowEnvironment::Checkpoint start = env.open();
      BranchUnion result;
      for (NodeId id = statement + 1; id < tree_.node(statement).subtree_end; ++id) {
        if (tree_.kind(id) != NodeKind::kBlock) continue;
        NodeId owner = tree_.parent(id);
        if (owner == kNoNode || tree_.parent(owner) == kNoNode ||
            tree_.parent(tree_.parent(owner)) != statement) {
          continue;  // only the case bodies directly in this match
        }
        walk_block(id, env);
        result.add_branch(env.changes_since(start));
        env.rollback_to(start);
      }
      result.apply(env, true);
      env.close(start);
      return;
    }
    case NodeKind::kGlobalStatement:
    case NodeKind::kNonlocalStatement:
    case NodeKind::kImportStatement:
    case NodeKind::kImportFromStatement:
    case NodeKind::kFutureImportStatement:
    case NodeKind::kComment:
      return;
    default:
      for (NodeId c : tree_.named_children(statement)) {
        if (tree_.kind(c) == NodeKind::kBlock) {
          walk_block(c, env);
        } else {
          eval(c, env);
        }
      }
      return;
  }
}

std::optional<GraphFlow::TensorTest> GraphFlow::tensor_test(NodeId condition) const {
  while (condition != kNoNode && tree_.kind(condition) == NodeKind::kParenthesizedExpression) {
    condition = tree_.first_named_child(condition);
  }
  if (condition == kNoNode) return std::nullopt;
  NodeKind k = tree_.kind(condition);
  if (k == NodeKind::kCall && file_.qualified_name(file_.callee(condition)) == "isinstance") {
    std::vector<NodeId> args = file_.positional_arguments(condition);
    if (args.size() != 2 || tree_.text(args[1]).find("Tensor") == std::string_view::npos) {
      return std::nullopt;
    }
    std::string name = dotted_text(tree_, args[0]);
    if (name.empty()) return std::nullopt;
    return TensorTest{name, false};
  }
  if (k == NodeKind::kNotOperator) {
    std::optional<TensorTest> inner = tensor_test(tree_.first_named_child(condition));
    if (inner) inner->true_means_not_tensor = !inner->true_means_not_tensor;
    return inner;
  }
  if (k == NodeKind::kComparisonOperator) {
    // `x is None`: true means no tensor.
    std::vector<NodeId> parts = tree_.named_children(condition);
    if (parts.size() == 2 && tree_.kind(parts[1]) == NodeKind::kNone &&
        tree_.text(condition).find(" is not ") == std::string_view::npos &&
        tree_.text(condition).find(" is ") != std::string_view::npos) {
      std::string name = dotted_text(tree_, parts[0]);
      if (!name.empty()) return TensorTest{name, true};
    }
    return std::nullopt;
  }
  if (k == NodeKind::kBooleanOperator) {
    // `x is None or not isinstance(x, torch.Tensor)`: each side says no tensor.
    NodeId op = tree_.child_by_field(condition, Field::kOperator);
    if (op == kNoNode || tree_.text(op) != "or") return std::nullopt;
    std::optional<TensorTest> l = tensor_test(tree_.child_by_field(condition, Field::kLeft));
    std::optional<TensorTest> r = tensor_test(tree_.child_by_field(condition, Field::kRight));
    if (l && r && l->name == r->name && l->true_means_not_tensor && r->true_means_not_tensor) {
      return l;
    }
  }
  return std::nullopt;
}

void GraphFlow::walk_if(NodeId statement, Env& env) {
  NodeId condition = tree_.child_by_field(statement, Field::kCondition);
  eval(condition, env);
  // `if isinstance(out, torch.Tensor): ... else: <out is no tensor>`.
  std::optional<TensorTest> test = tensor_test(condition);
  FlowEnvironment::Checkpoint start = env.open();
  NodeId consequence = tree_.child_by_field(statement, Field::kConsequence);
  if (test && test->true_means_not_tensor) env.erase(test->name);
  if (consequence != kNoNode) walk_block(consequence, env);
  BranchUnion result;
  result.add_branch(env.changes_since(start));
  env.rollback_to(start);
  bool has_else = false;
  for (NodeId c = tree_.first_child(statement); c != kNoNode; c = tree_.next_sibling(c)) {
    if (tree_.node(c).field != Field::kAlternative) continue;
    if (test && !test->true_means_not_tensor) env.erase(test->name);
    if (tree_.kind(c) == NodeKind::kElifClause) {
      eval(tree_.child_by_field(c, Field::kCondition), env);
      NodeId body = tree_.child_by_field(c, Field::kConsequence);
      if (body != kNoNode) walk_block(body, env);
    } else {
      has_else = true;
      NodeId body = tree_.child_by_field(c, Field::kBody);
      if (body != kNoNode) walk_block(body, env);
    }
    result.add_branch(env.changes_since(start));
    env.rollback_to(start);
  }
  result.apply(env, !has_else);
  env.close(start);
}

void GraphFlow::walk_try(NodeId statement, Env& env) {
  FlowEnvironment::Checkpoint start = env.open();
  NodeId body = tree_.child_by_field(statement, Field::kBody);
  if (body != kNoNode) walk_block(body, env);
  FlowEnvironment::Checkpoint after_body = env.open();
  BranchUnion result;
  NodeId finally_block = kNoNode;
  for (NodeId c = tree_.first_child(statement); c != kNoNode; c = tree_.next_sibling(c)) {
    NodeKind k = tree_.kind(c);
    if (k == NodeKind::kExceptClause || k == NodeKind::kExceptGroupClause) {
      // The handler may start from any point of the body: what it starts
      // with is the union of the states before and after the body.
      Env& handler = env;
      join_with_checkpoint(handler, start);
      NodeId alias = tree_.child_by_field(c, Field::kAlias);
      NodeId value = tree_.child_by_field(c, Field::kValue);
      if (value != kNoNode) {
        if (tree_.kind(value) == NodeKind::kAsPattern) {
          // Older grammar shape: `except E as e` as one as_pattern.
          NodeId target = tree_.child_by_field(value, Field::kAlias);
          if (target != kNoNode) {
            for (NodeId n : tree_.named_children(target)) bind_pattern(n, kException, handler);
          }
        } else {
          eval(value, handler);
        }
      }
      if (alias != kNoNode) bind_pattern(alias, kException, handler);
      for (NodeId b : tree_.named_children(c)) {
        if (tree_.kind(b) == NodeKind::kBlock) walk_block(b, handler);
      }
      result.add_branch(env.changes_since(after_body));
      env.rollback_to(after_body);
    } else if (k == NodeKind::kElseClause) {
      NodeId b = tree_.child_by_field(c, Field::kBody);
      if (b == kNoNode) b = tree_.first_named_child(c);
      if (b != kNoNode) walk_block(b, env);
      result.add_branch(env.changes_since(after_body));
      env.rollback_to(after_body);
    } else if (k == NodeKind::kFinallyClause) {
      finally_block = c;
    }
  }
  result.apply(env, true);
  env.close(after_body);
  env.close(start);
  if (finally_block != kNoNode) {
    for (NodeId b : tree_.named_children(finally_block)) {
      if (tree_.kind(b) == NodeKind::kBlock) walk_block(b, env);
    }
  }
}

void GraphFlow::walk_with(NodeId statement, Env& env) {
  bool saved = grad_enabled_;
  for (NodeId clause : tree_.named_children(statement)) {
    if (tree_.kind(clause) != NodeKind::kWithClause) continue;
    for (NodeId item : tree_.named_children(clause)) {
      if (tree_.kind(item) != NodeKind::kWithItem) continue;
      NodeId value = tree_.child_by_field(item, Field::kValue);
      if (value == kNoNode) continue;
      NodeId expression = value;
      NodeId alias = kNoNode;
      if (tree_.kind(value) == NodeKind::kAsPattern) {
        expression = tree_.first_named_child(value);
        alias = tree_.child_by_field(value, Field::kAlias);
      }
      FlowBits bits = eval(expression, env);
      // Gradient mode switches: no_grad(), inference_mode(), enable_grad(),
      // set_grad_enabled(flag).
      NodeId fn = tree_.kind(expression) == NodeKind::kCall ? file_.callee(expression) : expression;
      std::string q = file_.qualified_name(fn);
      std::string_view last = vocabulary::last_component(q);
      if (last == "no_grad" || last == "inference_mode") {
        bool disables = true;
        if (last == "inference_mode" && tree_.kind(expression) == NodeKind::kCall) {
          std::vector<NodeId> args = file_.positional_arguments(expression);
          NodeId flag = !args.empty() ? args.front() : file_.keyword_argument(expression, "mode");
          if (flag != kNoNode && tree_.kind(flag) == NodeKind::kFalse) disables = false;
        }
        if (disables) grad_enabled_ = false;
      } else if (last == "enable_grad") {
        grad_enabled_ = true;
      } else if (last == "set_grad_enabled" && tree_.kind(expression) == NodeKind::kCall) {
        std::vector<NodeId> args = file_.positional_arguments(expression);
        NodeId flag = !args.empty() ? args.front() : file_.keyword_argument(expression, "mode");
        // Only a literal False is known to disable; `phase == "train"` may not.
        grad_enabled_ = !(flag != kNoNode && tree_.kind(flag) == NodeKind::kFalse);
      }
      if (alias != kNoNode) {
        for (NodeId target : tree_.named_children(alias)) {
          assign_target(target, expression, bits, env, item);
        }
      }
    }
  }
  NodeId body = tree_.child_by_field(statement, Field::kBody);
  if (body != kNoNode) walk_block(body, env);
  grad_enabled_ = saved;
}

void GraphFlow::walk_loop_body(NodeId body, Env& env) {
  FlowEnvironment::Checkpoint entry = env.open();
  ++loop_depth_;
  walk_block(body, env);
  if (loop_depth_ <= kMaxLoopDepthWalkedTwice) {
    bool grows = false;
    for (const auto& c : env.changes_since(entry)) {
      grows |= (c.after.bound && !c.before.bound) || (c.after.bits & ~c.before.bits) != 0;
    }
    if (grows) {
      // Something new reaches the next iteration: walk again with it.
      join_with_checkpoint(env, entry);
      walk_block(body, env);
    }
  }
  --loop_depth_;
  join_with_checkpoint(env, entry);
  env.close(entry);
}

}  // namespace gpuleak::lint
