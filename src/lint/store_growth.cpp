#include "store_growth.h"

#include "vocabulary.h"

namespace gpuleak::lint {
namespace {

std::string root_of(const std::string& path) { return path.substr(0, path.find('.')); }

bool mentions(const FileAnalysis& file, NodeId expression, const std::string& path) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = expression; id < tree.node(expression).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if ((k == NodeKind::kIdentifier || k == NodeKind::kAttribute) &&
        dotted_text(tree, id) == path) {
      return true;
    }
  }
  return false;
}

// An unconditional `path = ...` (not a self-update), `path.clear()` or
// `del path` inside the loop body.
bool reset_in_loop(const FileAnalysis& file, const std::string& path, NodeId loop,
                   std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  NodeId body = file.loop_body(loop);
  if (body == kNoNode) return false;
  for (NodeId id = body; id < tree.node(body).subtree_end; ++id) {
    if (file.scope_index_of(id) != scope) continue;
    NodeKind k = tree.kind(id);
    bool resets = false;
    if (k == NodeKind::kAssignment) {
      NodeId left = tree.child_by_field(id, Field::kLeft);
      NodeId right = tree.child_by_field(id, Field::kRight);
      resets = left != kNoNode && right != kNoNode && dotted_text(tree, left) == path &&
               !mentions(file, right, path);
    } else if (k == NodeKind::kCall) {
      NodeId receiver = file.method_receiver(id);
      resets = receiver != kNoNode && file.callee_last_name(id) == "clear" &&
               dotted_text(tree, receiver) == path;
    } else if (k == NodeKind::kDeleteStatement) {
      std::string_view text = tree.text(id);
      resets = text.find(path) != std::string_view::npos;
    }
    if (resets && !file.runs_conditionally_in(id, loop)) return true;
  }
  return false;
}

bool is_parameter(const Scope& scope, const std::string& name) {
  for (const auto& p : scope.parameters) {
    if (p == name) return true;
  }
  return false;
}

}  // namespace

std::string container_path(const FileAnalysis& file, NodeId container) {
  const SyntaxTree& tree = file.tree();
  NodeId n = container;
  for (int guard = 0; n != kNoNode && guard < 64; ++guard) {
    std::string dotted = dotted_text(tree, n);
    if (!dotted.empty()) return dotted;
    switch (tree.kind(n)) {
      case NodeKind::kSubscript:
        n = tree.child_by_field(n, Field::kValue);
        break;
      case NodeKind::kCall: {
        NodeId receiver = file.method_receiver(n);
        n = receiver != kNoNode ? receiver : kNoNode;
        break;
      }
      case NodeKind::kAttribute:
        n = tree.child_by_field(n, Field::kObject);
        break;
      case NodeKind::kParenthesizedExpression:
        n = tree.first_named_child(n);
        break;
      default:
        return {};
    }
  }
  return {};
}

bool key_varies_per_step(const FileAnalysis& file, NodeId key) {
  if (key == kNoNode) return false;
  const SyntaxTree& tree = file.tree();
  for (NodeId id = key; id < tree.node(key).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kIdentifier && vocabulary::is_step_counter_name(tree.text(id))) return true;
    if (k == NodeKind::kCall) {
      std::string q = file.qualified_name(file.callee(id));
      if (q == "len" || q == "next" || q.rfind("time.", 0) == 0 || q.rfind("uuid.", 0) == 0 ||
          q.rfind("datetime.", 0) == 0) {
        return true;
      }
    }
  }
  return false;
}

bool container_bounded_elsewhere(const FileAnalysis& file, const std::string& path) {
  const SyntaxTree& tree = file.tree();
  int rebindings = 0;
  for (NodeId call : file.calls()) {
    NodeId receiver = file.method_receiver(call);
    if (receiver == kNoNode) continue;
    std::string_view m = file.callee_last_name(call);
    if ((m == "clear" || m == "pop" || m == "popleft" || m == "popitem" || m == "remove") &&
        dotted_text(tree, receiver) == path) {
      return true;
    }
  }
  for (NodeId id = 0; id < tree.size(); ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kDeleteStatement) {
      for (NodeId t = id; t < tree.node(id).subtree_end; ++t) {
        if (tree.kind(t) == NodeKind::kSubscript &&
            dotted_text(tree, tree.child_by_field(t, Field::kValue)) == path) {
          return true;
        }
      }
    } else if (k == NodeKind::kAssignment) {
      NodeId left = tree.child_by_field(id, Field::kLeft);
      NodeId right = tree.child_by_field(id, Field::kRight);
      if (left == kNoNode || right == kNoNode || dotted_text(tree, left) != path) continue;
      if (tree.kind(right) == NodeKind::kCall &&
          file.keyword_argument(right, "maxlen") != kNoNode) {
        return true;  // deque(maxlen=N)
      }
      if (tree.kind(right) == NodeKind::kCall &&
          file.qualified_name(file.callee(right)).rfind("weakref.", 0) == 0) {
        return true;  // entries go when their keys or values are collected
      }
      if (mentions(file, right, path)) continue;
      // A rebinding that starts it afresh: for an attribute, any outside
      // __init__ (a reset method); for a name, any after the first, which
      // created it.
      const Scope& scope = file.scope_of(id);
      if (path.rfind("self.", 0) == 0) {
        if (scope.name != "__init__") return true;
      } else if (++rebindings > 1) {
        return true;
      }
    } else if (k == NodeKind::kSubscript) {
      // c = c[-N:] and the like: slicing keeps it bounded.
      NodeId parent = tree.parent(id);
      if (parent != kNoNode && tree.kind(parent) == NodeKind::kAssignment &&
          tree.node(id).field == Field::kRight &&
          dotted_text(tree, tree.child_by_field(id, Field::kValue)) == path &&
          dotted_text(tree, tree.child_by_field(parent, Field::kLeft)) == path) {
        return true;
      }
    }
  }
  return false;
}

GrowthVerdict store_growth(const FileAnalysis& file, const StoreEvent& store) {
  GrowthVerdict v;
  v.container = container_path(file, store.container);
  if (v.container.empty()) return v;
  switch (store.kind) {
    case StoreKind::kLocalName:
    case StoreKind::kAttribute:
    case StoreKind::kGlobalName:
      return v;  // a binding overwrites; it does not accumulate
    case StoreKind::kSubscript:
      if (!key_varies_per_step(file, store.key)) return v;
      break;
    default:
      break;
  }
  const Scope& scope = file.scopes()[store.scope];
  std::string root = root_of(v.container);
  bool through_self = root == "self" || root == "cls";
  bool declared_global = scope.declared_global.count(root) != 0;
  bool closure_or_global =
      store.scope != 0 && !scope.assigned.count(root) && !is_parameter(scope, root);
  v.local = !(through_self || declared_global || closure_or_global);

  NodeId loop = file.innermost_loop(store.site);
  if (loop != kNoNode) {
    int outlived = 0;
    for (NodeId l = loop; l != kNoNode; l = file.outer_loop(l)) {
      if (reset_in_loop(file, v.container, l, store.scope)) break;
      ++outlived;
    }
    if (outlived == 0) return v;
    if (!v.local && container_bounded_elsewhere(file, v.container)) return v;
    v.growth = Growth::kPerIteration;
    v.loop = loop;
    v.loops_outlived = v.local ? outlived : outlived + 1;
    return v;
  }
  // Outside loops: only a container that outlives a call made once per step.
  if (store.scope == 0 || scope.name == "__init__" || v.local ||
      (!through_self && is_parameter(scope, root))) {
    return v;
  }
  if (container_bounded_elsewhere(file, v.container)) return v;
  v.growth = Growth::kPerCall;
  return v;
}

}  // namespace gpuleak::lint
