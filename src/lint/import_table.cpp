#include "import_table.h"

#include <string>
#include <utility>

namespace gpuleak::lint {
namespace {

bool is_gpu_framework(std::string_view module) {
  for (std::string_view root : {"torch", "lightning", "pytorch_lightning", "transformers",
                                "accelerate", "torchvision", "timm", "deepspeed", "torchmetrics"}) {
    if (module == root || (module.size() > root.size() && module.substr(0, root.size()) == root &&
                           module[root.size()] == '.')) {
      return true;
    }
  }
  return false;
}

// Frameworks with an autograd of their own: a file of theirs calls
// `loss.backward()` too, but its tensors follow that framework's rules
// (MXNet records a graph only under `autograd.record()`).
bool is_other_autograd_framework(std::string_view module) {
  for (std::string_view root :
       {"mxnet", "tensorflow", "jax", "paddle", "mindspore", "oneflow", "chainer", "keras"}) {
    if (module == root || (module.size() > root.size() && module.substr(0, root.size()) == root &&
                           module[root.size()] == '.')) {
      return true;
    }
  }
  return false;
}

std::string without_spaces(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\\') out += c;
  }
  return out;
}

}  // namespace

std::string dotted_text(const SyntaxTree& tree, NodeId expression) {
  if (expression == kNoNode) return {};
  switch (tree.kind(expression)) {
    case NodeKind::kIdentifier:
      return std::string(tree.text(expression));
    case NodeKind::kAttribute: {
      std::string object = dotted_text(tree, tree.child_by_field(expression, Field::kObject));
      NodeId attr = tree.child_by_field(expression, Field::kAttributeName);
      if (object.empty() || attr == kNoNode) return {};
      return object + "." + std::string(tree.text(attr));
    }
    case NodeKind::kParenthesizedExpression: {
      NodeId inner = tree.first_named_child(expression);
      return inner == kNoNode ? std::string() : dotted_text(tree, inner);
    }
    default:
      return {};
  }
}

ImportTable::ImportTable(const SyntaxTree& tree) {
  for (NodeId id = 0; id < tree.size(); ++id) {
    NodeKind kind = tree.kind(id);
    if (kind == NodeKind::kImportStatement) {
      for (NodeId c = tree.first_child(id); c != kNoNode; c = tree.next_sibling(c)) {
        if (tree.node(c).field != Field::kName) continue;
        if (tree.kind(c) == NodeKind::kAliasedImport) {
          std::string module = without_spaces(tree.text(tree.child_by_field(c, Field::kName)));
          std::string alias(tree.text(tree.child_by_field(c, Field::kAlias)));
          alias_to_module_[alias] = module;
          imports_torch_ |= is_gpu_framework(module);
          imports_other_autograd_ |= is_other_autograd_framework(module);
        } else {
          std::string module = without_spaces(tree.text(c));
          // `import torch.nn` binds `torch`, which already maps to itself.
          imports_torch_ |= is_gpu_framework(module);
          imports_other_autograd_ |= is_other_autograd_framework(module);
        }
      }
    } else if (kind == NodeKind::kImportFromStatement) {
      NodeId module_node = tree.child_by_field(id, Field::kModuleName);
      if (module_node == kNoNode) continue;
      std::string module = without_spaces(tree.text(module_node));
      imports_torch_ |= is_gpu_framework(module);
      imports_other_autograd_ |= is_other_autograd_framework(module);
      for (NodeId c = tree.first_child(id); c != kNoNode; c = tree.next_sibling(c)) {
        if (tree.node(c).field != Field::kName) continue;
        if (tree.kind(c) == NodeKind::kAliasedImport) {
          std::string name = without_spaces(tree.text(tree.child_by_field(c, Field::kName)));
          std::string alias(tree.text(tree.child_by_field(c, Field::kAlias)));
          std::string qualified = module;
          qualified.append(".").append(name);
          alias_to_module_[alias] = std::move(qualified);
        } else {
          std::string name = without_spaces(tree.text(c));
          std::string qualified = module;
          qualified.append(".").append(name);
          alias_to_module_[name] = std::move(qualified);
        }
      }
    }
  }
}

std::string ImportTable::qualified_name(const SyntaxTree& tree, NodeId expression) const {
  std::string dotted = dotted_text(tree, expression);
  if (dotted.empty()) return dotted;
  std::size_t dot = dotted.find('.');
  std::string head = dotted.substr(0, dot);
  auto it = alias_to_module_.find(head);
  if (it == alias_to_module_.end()) return dotted;
  return dot == std::string::npos ? it->second : it->second + dotted.substr(dot);
}

namespace {

void collect_targets(const SyntaxTree& tree, NodeId target, std::vector<NodeId>& out) {
  if (target == kNoNode) return;
  switch (tree.kind(target)) {
    case NodeKind::kIdentifier:
    case NodeKind::kAttribute:
      out.push_back(target);
      return;
    case NodeKind::kListSplatPattern:
    case NodeKind::kListSplat:
      for (NodeId c : tree.named_children(target)) collect_targets(tree, c, out);
      return;
    default:
      if (is_unpacking_target(tree.kind(target))) {
        for (NodeId c : tree.named_children(target)) collect_targets(tree, c, out);
      }
      return;
  }
}

}  // namespace

bool is_unpacking_target(NodeKind kind) {
  switch (kind) {
    case NodeKind::kPatternList:
    case NodeKind::kTuplePattern:
    case NodeKind::kListPattern:
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kParenthesizedExpression:
    case NodeKind::kExpressionList:
      return true;
    default:
      return false;
  }
}

std::vector<NodeId> bound_targets(const SyntaxTree& tree, NodeId target) {
  std::vector<NodeId> out;
  collect_targets(tree, target, out);
  return out;
}

void bound_names(const SyntaxTree& tree, NodeId target, std::vector<std::string>& out) {
  for (NodeId name : bound_targets(tree, target)) {
    if (tree.kind(name) == NodeKind::kIdentifier) out.emplace_back(tree.text(name));
  }
}

}  // namespace gpuleak::lint
