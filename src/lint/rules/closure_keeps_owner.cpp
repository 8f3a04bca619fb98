// GL207: an __init__ stores on `self` a lambda, a nested def or a bound
// method that refers to `self` (directly, or as the argument of what it
// stores: `LambdaLR(self.op, lr_lambda=lambda s: self.lr)`), so the object
// and the closure hold each other; when the object, which holds GPU memory,
// is made anew on every iteration, each dropped one waits for the cycle
// collector (pytorch/pytorch#47589, #51883).
#include <fmt/format.h>

#include "lint/object_repetition.h"
#include "lint/rules/rule_factories.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL207",
    "closure-keeps-owner",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "An object stores a lambda or bound method that refers to itself, and is made anew in a loop.",
    "A lambda, nested function or bound method that uses `self`, stored on `self` (or inside "
    "something stored there, such as a scheduler's `lr_lambda`), makes a reference cycle: the "
    "object holds the closure and the closure holds the object. Reference counting never frees "
    "it; only Python's cycle collector does, at a time it chooses. When such an object holds "
    "GPU memory (a model, an optimizer's state, tensors) and a new one is made on every "
    "iteration, the dropped ones pile up on the GPU until a collection, and a run can go out of "
    "memory first.",
    "Do not let the closure hold the object: compute from values passed in (`lambda s: lr`), use "
    "`weakref.WeakMethod(self.m)` or a `weakref.ref(self)` inside the lambda, or make the object "
    "once outside the loop; as a stopgap call `gc.collect()` after each iteration.",
};

// Short code quotes for the message.
std::string shown(const FileAnalysis& file, NodeId node) { return quote(file, node, 50); }

bool uses_self(const SyntaxTree& tree, NodeId node) {
  for (NodeId n = node; n < tree.node(node).subtree_end; ++n) {
    if (tree.kind(n) == NodeKind::kIdentifier && tree.text(n) == "self") return true;
  }
  return false;
}

// A method of the class `class_node` named `name`.
bool is_method_of(const FileAnalysis& file, std::string_view name, NodeId class_node) {
  for (std::size_t s : file.scopes_named_ref(name)) {
    if (file.scopes()[s].class_node == class_node) return true;
  }
  return false;
}

// Why `value` (the right side of `self.x = value` in an __init__ of the
// class `class_node`) holds `self`; "" when it does not.
std::string holds_self(const FileAnalysis& file, NodeId value, NodeId class_node, int depth) {
  const SyntaxTree& tree = file.tree();
  switch (tree.kind(value)) {
    case NodeKind::kLambda:
      return uses_self(tree, value) ? fmt::format("the lambda `{}` uses `self`", shown(file, value))
                                    : std::string();
    case NodeKind::kAttribute: {
      NodeId object = tree.child_by_field(value, Field::kObject);
      NodeId attr = tree.child_by_field(value, Field::kAttributeName);
      if (object != kNoNode && attr != kNoNode && tree.text(object) == "self" &&
          is_method_of(file, tree.text(attr), class_node)) {
        return fmt::format("the bound method `{}` holds `self`", tree.text(value));
      }
      return {};
    }
    case NodeKind::kIdentifier: {
      // A def nested in the __init__ that uses `self`.
      std::size_t here = file.scope_index_of(value);
      for (std::size_t s : file.scopes_named_ref(tree.text(value))) {
        const Scope& nested = file.scopes()[s];
        if (tree.kind(nested.node) == NodeKind::kFunctionDefinition &&
            file.scope_index_of(tree.parent(nested.definition)) == here &&
            uses_self(tree, nested.body)) {
          return fmt::format("the nested function `{}` uses `self`", nested.name);
        }
      }
      return {};
    }
    case NodeKind::kCall: {
      if (depth > 0) return {};
      std::string qualified = file.qualified_name(file.callee(value));
      std::string_view last = file.callee_last_name(value);
      // Weak references break the cycle; hook registrations are GL202's.
      if (qualified.rfind("weakref.", 0) == 0 || last.find("register_") == 0) return {};
      NodeId args = tree.child_by_field(value, Field::kArguments);
      if (args == kNoNode) return {};
      for (NodeId a : tree.named_children(args)) {
        NodeId inner = a;
        if (tree.kind(a) == NodeKind::kKeywordArgument) {
          inner = tree.child_by_field(a, Field::kValue);
          if (inner == kNoNode) continue;
        }
        std::string why = holds_self(file, inner, class_node, depth + 1);
        if (!why.empty()) {
          return fmt::format("`{}` keeps its argument `{}`: {}", shown(file, file.callee(value)),
                             shown(file, a), why);
        }
      }
      return {};
    }
    default:
      return {};
  }
}

// What GPU memory the object holds, as evidence: an nn.Module, an optimizer
// made in its __init__, or a CUDA tensor handed to its constructor; "" when
// nothing shows it.
std::string gpu_state(const FileAnalysis& file, std::size_t scope, const ClassFacts& c) {
  const Scope& init = file.scopes()[scope];
  const SyntaxTree& tree = file.tree();
  if (c.is_module) return fmt::format("`{}` is an nn.Module (its parameters)", c.name);
  for (NodeId n = init.node; n < tree.node(init.node).subtree_end; ++n) {
    if (tree.kind(n) != NodeKind::kCall || file.scope_index_of(n) != scope) {
      continue;
    }
    std::string qualified = file.qualified_name(file.callee(n));
    if (qualified.rfind("torch.optim.", 0) == 0 &&
        qualified.find("lr_scheduler") == std::string::npos) {
      return fmt::format("`{}` (line {}) keeps an optimizer's state", shown(file, n),
                         tree.start_point(n).row + 1);
    }
    if (file.is_torch_module_constructor(n)) {
      return fmt::format("`{}` (line {}) is a network", shown(file, n),
                         tree.start_point(n).row + 1);
    }
  }
  for (NodeId call : file.calls_named(c.name)) {
    for (NodeId a : file.positional_arguments(call)) {
      if (file.value_bits(a) & kDeviceTensor) {
        return fmt::format("`{}` at line {} hands it `{}`, a CUDA tensor", shown(file, call),
                           tree.start_point(call).row + 1, shown(file, a));
      }
    }
  }
  return {};
}

class ClosureKeepsOwner final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    const SyntaxTree& tree = file.tree();
    for (std::size_t s = 1; s < file.scopes().size(); ++s) {
      const Scope& init = file.scopes()[s];
      if (init.name != "__init__" || init.class_node == kNoNode || init.body == kNoNode) continue;
      const ClassFacts* c = file.class_facts(init.class_node);
      if (c == nullptr) continue;
      std::vector<std::pair<NodeId, std::string>> cycles;
      for (NodeId n = init.body; n < tree.node(init.body).subtree_end; ++n) {
        if (tree.kind(n) != NodeKind::kAssignment || file.scope_index_of(n) != s) continue;
        NodeId left = tree.child_by_field(n, Field::kLeft);
        NodeId right = tree.child_by_field(n, Field::kRight);
        if (left == kNoNode || right == kNoNode || tree.kind(left) != NodeKind::kAttribute) {
          continue;
        }
        NodeId object = tree.child_by_field(left, Field::kObject);
        if (object == kNoNode || tree.text(object) != "self") continue;
        std::string why = holds_self(file, right, init.class_node, 0);
        if (!why.empty()) cycles.emplace_back(n, std::move(why));
      }
      if (cycles.empty()) continue;
      Repetition again = runs_again(file, s);
      if (!again.repeated || !again.object_per_iteration) continue;
      std::string gpu = gpu_state(file, s, *c);
      if (gpu.empty()) continue;
      for (auto& [assignment, why] : cycles) {
        NodeId left = tree.child_by_field(assignment, Field::kLeft);
        RuleReport r;
        r.node = assignment;
        r.message = fmt::format(
            "`{}` stores on the object something that holds the object ({}): a reference cycle "
            "that only the cycle collector frees; {}, and {} makes a new `{}` each time, so the "
            "GPU memory of every dropped one stays until a collection",
            tree.text(left), why, gpu, again.why, c->name);
        r.fix = fmt::format(
            "let `{}` not refer to `self` (pass the values it needs, or use `weakref.WeakMethod` / "
            "`weakref.ref(self)`), or make one `{}` outside the loop",
            tree.text(left), c->name);
        sink.report(kInfo, std::move(r));
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_closure_keeps_owner_rule() {
  return std::make_unique<ClosureKeepsOwner>();
}

}  // namespace gpuleak::lint
