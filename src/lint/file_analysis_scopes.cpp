// FileAnalysis, where a node is: its scope (function or class), the loops
// around it, and whether it runs on every pass of a body.
#include "file_analysis.h"

namespace gpuleak::lint {

std::size_t FileAnalysis::scope_index_of(NodeId node) const {
  if (node < scope_of_node_narrow_.size()) return scope_of_node_narrow_[node];
  return node < scope_of_node_.size() ? scope_of_node_[node] : 0;
}

const ClassFacts* FileAnalysis::class_facts(NodeId class_node) const {
  auto it = class_index_.find(class_node);
  return it == class_index_.end() ? nullptr : &classes_[it->second];
}

std::vector<std::size_t> FileAnalysis::scopes_named(std::string_view name) const {
  return scopes_named_ref(name);
}

const std::vector<std::size_t>& FileAnalysis::scopes_named_ref(std::string_view name) const {
  static const std::vector<std::size_t> kNone;
  auto it = scopes_by_name_.find(std::string(name));
  return it == scopes_by_name_.end() ? kNone : it->second;
}

NodeId FileAnalysis::innermost_loop(NodeId node) const {
  NodeId child = node;
  for (NodeId p = tree_.parent(node); p != kNoNode; child = p, p = tree_.parent(p)) {
    NodeKind k = tree_.kind(p);
    if (k == NodeKind::kFunctionDefinition || k == NodeKind::kLambda ||
        k == NodeKind::kClassDefinition) {
      return kNoNode;
    }
    if ((k == NodeKind::kForStatement || k == NodeKind::kWhileStatement) &&
        tree_.node(child).field == Field::kBody) {
      return p;
    }
  }
  return kNoNode;
}

bool FileAnalysis::runs_conditionally_within(NodeId node, NodeId body,
                                             const std::function<bool(NodeId)>& is_guard) const {
  auto guard = [&](NodeId statement) {
    return is_guard && is_guard(tree_.child_by_field(statement, Field::kCondition));
  };
  NodeId child = node;
  for (NodeId p = tree_.parent(node); p != kNoNode && p != body; child = p, p = tree_.parent(p)) {
    switch (tree_.kind(p)) {
      case NodeKind::kIfStatement:
        if (tree_.node(child).field != Field::kCondition && !guard(p)) return true;
        break;
      case NodeKind::kElifClause:
        if (!guard(p)) return true;
        break;
      case NodeKind::kElseClause:
      case NodeKind::kExceptClause:
      case NodeKind::kExceptGroupClause:
      case NodeKind::kConditionalExpression:
      case NodeKind::kBooleanOperator:
      case NodeKind::kMatchStatement:
        return true;
      case NodeKind::kForStatement:
      case NodeKind::kWhileStatement:
        if (tree_.node(child).field == Field::kBody) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

std::vector<std::string> FileAnalysis::loop_variables(NodeId loop) const {
  std::vector<std::string> out;
  if (tree_.kind(loop) == NodeKind::kForStatement) {
    bound_names(tree_, tree_.child_by_field(loop, Field::kLeft), out);
  }
  return out;
}

NodeId FileAnalysis::loop_iterable(NodeId loop) const {
  if (tree_.kind(loop) == NodeKind::kForStatement) return tree_.child_by_field(loop, Field::kRight);
  return tree_.child_by_field(loop, Field::kCondition);
}

bool FileAnalysis::is_unbounded_loop(NodeId loop) const {
  NodeId it = loop_iterable(loop);
  if (it == kNoNode) return false;
  if (tree_.kind(loop) == NodeKind::kWhileStatement) {
    return tree_.kind(it) == NodeKind::kTrue || tree_.text(it) == "1";
  }
  if (tree_.kind(it) == NodeKind::kCall) {
    std::string q = qualified_name(callee(it));
    return q == "itertools.count" || q == "count";
  }
  return false;
}

}  // namespace gpuleak::lint
