#include "lint/object_repetition.h"

#include <fmt/format.h>

#include <algorithm>

#include "lint/rule.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {

namespace {

bool in_comprehension(const SyntaxTree& tree, NodeId node) {
  return tree.ancestor_of_kind(
             node, {NodeKind::kListComprehension, NodeKind::kGeneratorExpression,
                    NodeKind::kSetComprehension, NodeKind::kDictionaryComprehension}) != kNoNode;
}

}  // namespace

std::vector<const ClassFacts*> class_and_subclasses(const FileAnalysis& file, NodeId class_node) {
  std::vector<const ClassFacts*> family;
  const ClassFacts* c = file.class_facts(class_node);
  if (c == nullptr) return family;
  family.push_back(c);
  for (std::size_t i = 0; i < family.size() && family.size() < 16; ++i) {
    for (const ClassFacts& other : file.classes()) {
      for (const std::string& base : other.bases) {
        if (vocabulary::last_component(base) == family[i]->name &&
            std::find(family.begin(), family.end(), &other) == family.end()) {
          family.push_back(&other);
        }
      }
    }
  }
  return family;
}

bool result_replaced(const SyntaxTree& tree, NodeId call) {
  NodeId up = tree.parent(call);
  if (up == kNoNode) return false;
  if (tree.kind(up) == NodeKind::kExpressionStatement) return true;
  // `Foo().run()`: a method called on the new object, which is then dropped.
  if (tree.kind(up) == NodeKind::kAttribute && tree.child_by_field(up, Field::kObject) == call) {
    return true;
  }
  if (tree.kind(up) != NodeKind::kAssignment || tree.child_by_field(up, Field::kRight) != call) {
    return false;
  }
  NodeId left = tree.child_by_field(up, Field::kLeft);
  return left != kNoNode &&
         (tree.kind(left) == NodeKind::kIdentifier || tree.kind(left) == NodeKind::kAttribute);
}

Repetition runs_again(const FileAnalysis& file, std::size_t scope, int depth) {
  Repetition out;
  const SyntaxTree& tree = file.tree();
  const Scope& where = file.scopes()[scope];
  if (file.runs_per_step(scope)) {
    out.repeated = true;
    out.runner = where.name;
    out.why = fmt::format("`{}` runs once per step", where.name);
    return out;
  }
  std::vector<std::string> names{where.name};
  if (where.name == "__init__" && where.class_node != kNoNode) {
    // Subclasses of the file run this __init__ through super().__init__().
    std::vector<const ClassFacts*> family = class_and_subclasses(file, where.class_node);
    if (family.empty()) return out;
    names.clear();
    for (const ClassFacts* c : family) names.push_back(c->name);
  }
  for (const std::string& name : names) {
    for (NodeId other : file.calls_named(name)) {
      std::size_t caller = file.scope_index_of(other);
      if (caller == scope) continue;
      if (file.innermost_loop(other) != kNoNode || in_comprehension(tree, other)) {
        out.repeated = true;
        out.object_per_iteration = !in_comprehension(tree, other) && result_replaced(tree, other);
        out.runner = name;
        out.why = fmt::format("`{}` in the loop at line {}", quote(file, other, 40),
                              tree.start_point(other).row + 1);
        if (out.object_per_iteration) return out;
        continue;
      }
      if (caller == 0 || depth >= 3 || out.repeated) continue;
      Repetition outer = runs_again(file, caller, depth + 1);
      if (!outer.repeated) continue;
      out = outer;
      out.object_per_iteration = outer.object_per_iteration && result_replaced(tree, other);
      out.runner = name;
      out.why = fmt::format("`{}` in `{}`, {}", quote(file, other, 40), file.scopes()[caller].name,
                            outer.why);
      if (out.object_per_iteration) return out;
    }
  }
  return out;
}

}  // namespace gpuleak::lint
