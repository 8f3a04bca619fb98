// FileAnalysis, what a call runs and what it is given: the defs of this file
// a call can reach (callees_of), the classes a receiver is built from, the
// functions passed as an argument, and the call's own parts.
#include <algorithm>
#include <cctype>

#include "file_analysis.h"
#include "vocabulary.h"

namespace gpuleak::lint {

std::size_t FileAnalysis::project_module_function(NodeId call) const {
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  NodeId fn = callee(call);
  if (fn == kNoNode || tree_.kind(fn) != NodeKind::kAttribute) return kNone;
  NodeId object = tree_.child_by_field(fn, Field::kObject);
  if (object == kNoNode || tree_.kind(object) != NodeKind::kIdentifier ||
      !imports_.is_imported(tree_.text(object))) {
    return kNone;
  }
  std::string module = qualified_name(object);
  std::string_view root = std::string_view(module).substr(0, module.find('.'));
  if (root.empty() || vocabulary::is_known_library_module(root)) return kNone;
  std::size_t found = kNone;
  for (std::size_t s : scopes_named_ref(callee_last_name(call))) {
    const Scope& scope = scopes_[s];
    if (scope.class_node != kNoNode || tree_.kind(scope.node) != NodeKind::kFunctionDefinition ||
        scope_index_of(tree_.parent(scope.definition)) != 0) {
      continue;  // a method, a lambda or a nested def
    }
    if (found != kNone) return kNone;  // two defs of that name: which one is unknown
    found = s;
  }
  return found;
}

std::vector<std::size_t> FileAnalysis::callees_of(NodeId call) const {
  std::vector<std::size_t> out;
  NodeId fn = callee(call);
  if (fn == kNoNode) return out;
  bool method = tree_.kind(fn) == NodeKind::kAttribute;
  if (method) {
    // `os.remove(p)`, `np.save(...)`: a module's function, not a method here.
    NodeId object = tree_.child_by_field(fn, Field::kObject);
    if (object != kNoNode && tree_.kind(object) == NodeKind::kIdentifier &&
        imports_.is_imported(tree_.text(object))) {
      std::size_t own = project_module_function(call);
      if (own != static_cast<std::size_t>(-1)) out.push_back(own);
      return out;
    }
  }
  std::string_view name = callee_last_name(call);
  if (name.empty()) return out;
  const std::vector<std::size_t>& named = scopes_named_ref(name);
  // A name defined this often in one file (`__init__`, `get` in a module of
  // many classes) says nothing about which one runs: resolving it to all of
  // them would cost a pass over each, per call.
  if (named.size() > kMaxCalleesByName) return out;
  // `self.D.transform(x)` where every binding of `self.D` constructs a class
  // (`self.D = ImageTransformer(...)`): only that class's `transform` runs,
  // none when the class is not defined here.
  std::vector<std::string> receiver_classes;
  if (method) receiver_classes = constructed_classes(method_receiver(call));
  for (std::size_t s : named) {
    bool is_method = scopes_[s].class_node != kNoNode;
    if (is_method != method) continue;
    if (!receiver_classes.empty()) {
      const ClassFacts* owner = class_facts(scopes_[s].class_node);
      if (owner == nullptr || std::find(receiver_classes.begin(), receiver_classes.end(),
                                        owner->name) == receiver_classes.end()) {
        continue;
      }
    }
    out.push_back(s);
  }
  if (out.empty()) {
    // `crit = Window(10)` then `crit(loss)` (or `self.crit(loss)`): calling an
    // instance runs its class's `__call__`, when this file defines one.
    std::vector<std::string> classes = constructed_classes(fn);
    if (!classes.empty()) {
      const std::vector<std::size_t>& calls = scopes_named_ref("__call__");
      for (std::size_t s : calls) {
        if (calls.size() > kMaxCalleesByName) break;
        const ClassFacts* owner = class_facts(scopes_[s].class_node);
        if (owner != nullptr &&
            std::find(classes.begin(), classes.end(), owner->name) != classes.end()) {
          out.push_back(s);
        }
      }
      if (!out.empty()) return out;
    }
  }
  if (out.empty() && !method) {
    // log = make_logger(); log(x): the def the factory returns.
    auto it = factory_calls_by_name_.find(std::string(name));
    if (it != factory_calls_by_name_.end() && it->second.size() <= kMaxCalleesByName) {
      for (NodeId right : it->second) {
        for (std::size_t s : functions_passed_as(right)) out.push_back(s);
      }
    }
  }
  return out;
}

std::vector<std::string> FileAnalysis::constructed_classes(NodeId receiver) const {
  std::vector<std::string> out;
  if (receiver == kNoNode) return out;
  std::string path = dotted_text(tree_, receiver);
  if (path.empty() || path == "self" || path == "cls") return out;
  const std::vector<NodeId>& bindings = assignments_to(path);
  if (bindings.empty() && tree_.kind(receiver) == NodeKind::kIdentifier) {
    return classes_passed_for_parameter(path, scope_index_of(receiver));
  }
  for (NodeId a : bindings) {
    NodeId right = tree_.child_by_field(a, Field::kRight);
    if (right == kNoNode || tree_.kind(right) != NodeKind::kCall) return {};
    std::string_view name = callee_last_name(right);
    // A class by the naming convention; a factory (`build_model(cfg)`) may
    // return anything.
    if (name.empty() || !std::isupper(static_cast<unsigned char>(name[0]))) return {};
    out.emplace_back(name);
  }
  return out;
}

std::vector<std::string> FileAnalysis::classes_passed_for_parameter(const std::string& name,
                                                                    std::size_t scope) const {
  // `def torch_minimize(closure, parameters, stopping_criterion=None)` and
  // every call of it in the file that passes the parameter passes
  // `ExpMAStoppingCriterion()` (by keyword or by position): that class.
  // A call that leaves it out gets the default, which is no instance.
  std::vector<std::string> out;
  if (scope == 0) return out;
  const Scope& s = scopes_[scope];
  if (tree_.kind(s.node) != NodeKind::kFunctionDefinition) return out;
  std::size_t first = s.class_node != kNoNode ? 1 : 0;  // self
  std::size_t index = s.parameters.size();
  for (std::size_t p = first; p < s.parameters.size(); ++p) {
    if (s.parameters[p] == name) index = p - first;
  }
  if (index == s.parameters.size()) return out;
  if (scopes_named_ref(s.name).size() != 1) return out;  // which def a call runs is unknown
  for (NodeId call : calls_named(s.name)) {
    NodeId passed = keyword_argument(call, name);
    if (passed == kNoNode) {
      std::vector<NodeId> positional = positional_arguments(call);
      if (index < positional.size()) passed = positional[index];
    }
    if (passed == kNoNode) continue;
    if (tree_.kind(passed) != NodeKind::kCall) return {};
    std::string_view constructed = callee_last_name(passed);
    if (constructed.empty() || !std::isupper(static_cast<unsigned char>(constructed[0]))) return {};
    if (std::find(out.begin(), out.end(), constructed) == out.end()) out.emplace_back(constructed);
  }
  return out;
}

std::vector<std::size_t> FileAnalysis::functions_passed_as(NodeId argument) const {
  if (argument == kNoNode) return {};
  auto it = passed_as_memo_.find(argument);
  if (it != passed_as_memo_.end()) return it->second;
  std::vector<std::size_t> out = functions_passed_as(argument, 0);
  passed_as_memo_.emplace(argument, out);
  return out;
}

std::vector<std::size_t> FileAnalysis::functions_passed_as(NodeId argument, int depth) const {
  std::vector<std::size_t> out;
  // Factories returning factories are rare; a bound keeps `return f(x)` inside f finite.
  if (argument == kNoNode || depth > 3) return out;
  switch (tree_.kind(argument)) {
    case NodeKind::kLambda: {
      auto it = scope_by_node_.find(argument);
      if (it != scope_by_node_.end()) out.push_back(it->second);
      return out;
    }
    case NodeKind::kIdentifier:
    case NodeKind::kAttribute: {
      std::string dotted = dotted_text(tree_, argument);
      if (dotted.empty()) return out;
      out = scopes_named(vocabulary::last_component(dotted));
      if (!out.empty()) return out;
      // An instance of a class of this file: its __call__ runs.
      NodeId value = first_assigned_value(dotted);
      if (value != kNoNode && tree_.kind(value) == NodeKind::kCall) {
        std::string cls(vocabulary::last_component(dotted_text(tree_, callee(value))));
        for (const ClassFacts& c : classes_) {
          if (c.name != cls) continue;
          for (std::size_t s : scopes_named("__call__")) {
            if (scopes_[s].class_node == c.node) out.push_back(s);
          }
        }
      }
      return out;
    }
    case NodeKind::kParenthesizedExpression:
      return functions_passed_as(tree_.first_named_child(argument), depth + 1);
    case NodeKind::kCall: {
      std::string q = qualified_name(callee(argument));
      std::vector<NodeId> args = positional_arguments(argument);
      if (q == "functools.partial" || q == "partial") {
        return args.empty() ? out : functions_passed_as(args.front(), depth + 1);
      }
      // A factory: def make_hook(name): def hook(...): ...; return hook
      std::string dotted = dotted_text(tree_, callee(argument));
      if (dotted.empty()) return out;
      for (std::size_t factory : scopes_named(vocabulary::last_component(dotted))) {
        NodeId def = scopes_[factory].node;
        for (NodeId id = def + 1; id < tree_.node(def).subtree_end; ++id) {
          if (tree_.kind(id) != NodeKind::kReturnStatement || scope_index_of(id) != factory)
            continue;
          NodeId value = tree_.first_named_child(id);
          if (value == kNoNode) continue;
          for (std::size_t nested : functions_passed_as(value, depth + 1)) {
            if (tree_.contains(def, scopes_[nested].node)) out.push_back(nested);
          }
        }
      }
      return out;
    }
    default:
      return out;
  }
}

std::string_view FileAnalysis::callee_last_name(NodeId call) const {
  NodeId fn = callee(call);
  if (fn == kNoNode) return {};
  if (tree_.kind(fn) == NodeKind::kIdentifier) return tree_.text(fn);
  if (tree_.kind(fn) == NodeKind::kAttribute) {
    NodeId attr = tree_.child_by_field(fn, Field::kAttributeName);
    return attr == kNoNode ? std::string_view() : tree_.text(attr);
  }
  return {};
}

NodeId FileAnalysis::method_receiver(NodeId call) const {
  NodeId fn = callee(call);
  if (fn == kNoNode || tree_.kind(fn) != NodeKind::kAttribute) return kNoNode;
  return tree_.child_by_field(fn, Field::kObject);
}

const std::vector<NodeId>& FileAnalysis::calls_named(std::string_view name) const {
  static const std::vector<NodeId> kNone;
  auto it = calls_by_name_.find(std::string(name));
  return it == calls_by_name_.end() ? kNone : it->second;
}

std::vector<NodeId> FileAnalysis::positional_arguments(NodeId call) const {
  std::vector<NodeId> out;
  NodeId args = tree_.child_by_field(call, Field::kArguments);
  if (args == kNoNode) return out;
  if (tree_.kind(args) == NodeKind::kGeneratorExpression) {
    out.push_back(args);
    return out;
  }
  for (NodeId a : tree_.named_children(args)) {
    NodeKind k = tree_.kind(a);
    if (k == NodeKind::kKeywordArgument || k == NodeKind::kDictionarySplat) continue;
    out.push_back(a);
  }
  return out;
}

NodeId FileAnalysis::keyword_argument(NodeId call, std::string_view name) const {
  NodeId args = tree_.child_by_field(call, Field::kArguments);
  if (args == kNoNode || tree_.kind(args) != NodeKind::kArgumentList) return kNoNode;
  for (NodeId a : tree_.named_children(args)) {
    if (tree_.kind(a) != NodeKind::kKeywordArgument) continue;
    NodeId n = tree_.child_by_field(a, Field::kName);
    if (n != kNoNode && tree_.text(n) == name) return tree_.child_by_field(a, Field::kValue);
  }
  return kNoNode;
}

}  // namespace gpuleak::lint
