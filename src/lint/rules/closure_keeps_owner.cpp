// GL207: an __init__ stores on `self` a lambda, a nested def or a bound
// method that refers to `self` (directly, or as the argument of what it
// stores: `LambdaLR(self.op, lr_lambda=lambda s: self.lr)`), so the object
// and the closure hold each other; when the object, which holds GPU memory,
// is made anew on every iteration, each dropped one waits for the cycle
// collector (pytorch/pytorch#47589, #51883).
#include <fmt/format.h>

#include <algorithm>

#include "lint/object_repetition.h"
#include "lint/rules/rule_factories.h"

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

// `value` is the module input or output a forward hook method is handed:
// `def forward(self, module, input, output)` (or a pre-hook's `(self,
// module, input)`), registered as a forward hook in the file or shaped as
// one (a first parameter named for the module, the tensors not gradients).
bool forward_hook_activation(const FileAnalysis& file, std::size_t scope, NodeId value) {
  const SyntaxTree& tree = file.tree();
  if (tree.kind(value) != NodeKind::kIdentifier) return false;
  const std::vector<std::string>& p = file.scopes()[scope].parameters;
  std::string_view name = tree.text(value);
  if (p.size() < 3 || p.size() > 4 || p[0] != "self" || name.rfind("grad", 0) == 0) return false;
  bool tensor_parameter = name == p[2] || (p.size() == 4 && name == p[3]);
  if (!tensor_parameter) return false;
  for (NodeId registration : file.hook_registrations()) {
    if (file.callee_last_name(registration).find("forward") == std::string_view::npos) continue;
    std::vector<NodeId> args = file.positional_arguments(registration);
    if (args.empty()) continue;
    for (std::size_t hook : file.functions_passed_as(args.front())) {
      if (hook == scope) return true;
    }
  }
  // Shaped as one: a method (not `__init__(self, module, user_hooks)`) whose
  // first parameter names the module and whose tensors are named as such.
  if (file.scopes()[scope].name.rfind("__", 0) == 0) return false;
  bool module_first = p[1] == "module" || p[1] == "mod" || p[1] == "m" || p[1] == "layer";
  bool activation_name = false;
  for (std::string_view a : {"input", "inputs", "inp", "output", "outputs", "out", "args"}) {
    if (name == a) activation_name = true;
  }
  return module_first && activation_name;
}

// `t.grad_fn.register_hook(wrapper)` (or `t.register_hook`) in a method,
// where the hook uses `self`: the graph holds the hook, the hook the object.
// When the object also keeps a tensor of that graph in an attribute (a
// forward hook's `self.input = input`), the cycle runs through autograd
// nodes, which Python's cycle collector does not see: the object, the
// tensors and their graph are never freed (chr5tphr/zennit#13).
void check_cycles_through_autograd(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId call : file.calls_named("register_hook")) {
    std::size_t scope = file.scope_index_of(call);
    const Scope& method = file.scopes()[scope];
    if (scope == 0 || method.class_node == kNoNode) continue;
    std::vector<NodeId> args = file.positional_arguments(call);
    if (args.empty()) continue;
    std::string why;
    if (tree.kind(args.front()) == NodeKind::kAttribute) {
      why = holds_self(file, args.front(), method.class_node, 1);
    } else {
      for (std::size_t hook : file.functions_passed_as(args.front())) {
        const Scope& h = file.scopes()[hook];
        if (h.body != kNoNode && uses_self(tree, h.body)) {
          why = fmt::format("the hook `{}` uses `self`", h.name);
        }
      }
    }
    if (why.empty()) continue;
    // The class and its subclasses in the file: a subclass's method keeps
    // the tensor in the same object.
    std::vector<NodeId> family{method.class_node};
    for (const ClassFacts* c : class_and_subclasses(file, method.class_node)) {
      if (c->node != method.class_node) family.push_back(c->node);
    }
    for (NodeId n = 0; n < tree.size(); ++n) {
      if (tree.kind(n) != NodeKind::kAssignment) continue;
      std::size_t where = file.scope_index_of(n);
      if (std::find(family.begin(), family.end(), file.scopes()[where].class_node) ==
          family.end()) {
        continue;
      }
      NodeId left = tree.child_by_field(n, Field::kLeft);
      NodeId value = tree.child_by_field(n, Field::kRight);
      if (left == kNoNode || value == kNoNode || tree.kind(left) != NodeKind::kAttribute) continue;
      std::string container(tree.text(left));
      if (container.rfind("self.", 0) != 0) continue;
      // The kept value is a tensor of the graph: it carries one, or it is
      // the module's input or output handed to a forward hook.
      bool in_graph = (file.value_bits(value) & kCarriesGraph) != 0 ||
                      forward_hook_activation(file, where, value);
      if (!in_graph) continue;
      RuleReport r;
      r.node = n;
      r.message = fmt::format(
          "`{}` keeps `{}`, a tensor of the graph, on the object, while `{}` (line {}) hangs a "
          "hook on that graph and {}: object -> tensor -> autograd node -> hook -> object is a "
          "reference cycle through autograd nodes, which Python's cycle collector does not "
          "see, so the object, its tensors and their graph are never freed",
          container, tree.text(value), quote(file, call, 50), tree.start_point(call).row + 1, why);
      r.fix = fmt::format(
          "let the hook hold the object weakly (`ref = weakref.ref(self)`, then `ref()` in the "
          "hook), and drop `{}` when the hooks are removed",
          container);
      sink.report(kInfo, std::move(r));
    }
  }
}

class ClosureKeepsOwner final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    check_cycles_through_autograd(file, sink);
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
