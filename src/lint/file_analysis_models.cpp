// FileAnalysis, what the file's torch code is: models and their calls, losses,
// backward() and optimizer steps, DataLoaders and nn.Module constructors.

#include "file_analysis.h"
#include "vocabulary.h"

namespace gpuleak::lint {

bool FileAnalysis::is_model_expression(NodeId e, NodeId at) const {
  if (e == kNoNode) return false;
  NodeKind k = tree_.kind(e);
  if (k == NodeKind::kSubscript) {
    // self.models[i](x), heads["cls"](h)
    return is_model_expression(tree_.child_by_field(e, Field::kValue), at);
  }
  if (k == NodeKind::kParenthesizedExpression) {
    return is_model_expression(tree_.first_named_child(e), at);
  }
  std::string dotted = dotted_text(tree_, e);
  if (dotted.empty()) return false;
  if (dotted == "self") {
    const Scope& s = scope_of(at);
    const ClassFacts* c = s.class_node != kNoNode ? class_facts(s.class_node) : nullptr;
    return c != nullptr && c->is_module;
  }
  if (model_keys_.count(dotted)) return true;
  std::string_view last = vocabulary::last_component(dotted);
  if (vocabulary::is_capitalized(last)) return false;  // a class: constructing, not calling
  if (loss_keys_.count(dotted)) return false;
  if (!vocabulary::is_model_name(last)) return false;
  // The name says network; what the file binds to it may say otherwise.
  return !defined_as_function(dotted) && !bound_only_to_non_models(dotted, at);
}

bool FileAnalysis::defined_as_function(const std::string& dotted) const {
  // `def _setup_model(self, model)` called as `self._setup_model(...)`, or a
  // module-level `def generator(...)`: a function, whose result the
  // summaries describe. A property (`self.model` returning a module) is not.
  bool method = dotted.rfind("self.", 0) == 0 && dotted.find('.', 5) == std::string::npos;
  if (!method && dotted.find('.') != std::string::npos) return false;
  std::string_view last = vocabulary::last_component(dotted);
  if (last == "forward" || last == "__call__") return false;
  for (std::size_t s : scopes_named(last)) {
    const Scope& scope = scopes_[s];
    if ((scope.class_node != kNoNode) != method) continue;
    if (tree_.kind(scope.node) != NodeKind::kFunctionDefinition) continue;
    bool property = false;
    if (scope.definition != scope.node) {
      for (NodeId d : tree_.named_children(scope.definition)) {
        if (tree_.kind(d) == NodeKind::kDecorator &&
            tree_.text(d).find("property") != std::string_view::npos) {
          property = true;
        }
      }
    }
    if (!property) return true;
  }
  return false;
}

bool FileAnalysis::bound_only_to_non_models(const std::string& dotted, NodeId at) const {
  // `generator = None; generator = gen_ops_library`: every binding of the
  // local is None or another name that is no network.
  if (dotted.find('.') != std::string::npos || at == kNoNode) return false;
  const std::vector<NodeId>& all = assignments_to(dotted);
  if (all.empty()) return false;
  std::size_t scope = scope_index_of(at);
  bool any = false;
  for (NodeId a : all) {
    if (scope_index_of(a) != scope) continue;
    NodeId right = tree_.child_by_field(a, Field::kRight);
    if (right == kNoNode) return false;
    NodeKind k = tree_.kind(right);
    if (k == NodeKind::kNone) {
      any = true;
      continue;
    }
    if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) return false;
    std::string value = dotted_text(tree_, right);
    if (value.empty() || value == dotted || model_keys_.count(value) ||
        vocabulary::is_model_name(vocabulary::last_component(value)) || value == "self" ||
        value.rfind("self.", 0) == 0) {
      return false;
    }
    any = true;
  }
  return any;
}

bool FileAnalysis::is_model_call(NodeId call) const {
  NodeId fn = callee(call);
  if (fn == kNoNode) return false;
  if (tree_.kind(fn) == NodeKind::kAttribute) {
    NodeId attr = tree_.child_by_field(fn, Field::kAttributeName);
    if (attr != kNoNode && tree_.text(attr) == "forward") {
      NodeId object = tree_.child_by_field(fn, Field::kObject);
      if (object != kNoNode && tree_.kind(object) == NodeKind::kCall &&
          tree_.text(callee(object)) == "super") {
        return true;
      }
      return is_model_expression(object, call);
    }
  }
  return is_model_expression(fn, call);
}

bool FileAnalysis::is_loss_callee(NodeId call) const {
  NodeId fn = callee(call);
  std::string dotted = dotted_text(tree_, fn);
  if (dotted.empty()) return false;
  if (loss_keys_.count(dotted)) return true;
  std::string q = qualified_name(fn);
  if (q.starts_with("torch.nn.functional.") || q.starts_with("F.")) return true;
  std::string_view last = vocabulary::last_component(dotted);
  return !vocabulary::is_capitalized(last) && vocabulary::is_loss_name(last);
}

bool FileAnalysis::is_backward_call(NodeId call) const {
  std::string_view name = callee_last_name(call);
  if (name == "backward") return true;
  return qualified_name(callee(call)) == "torch.autograd.backward";
}

bool FileAnalysis::is_optimizer_step_call(NodeId call) const {
  if (callee_last_name(call) != "step") return false;
  NodeId receiver = method_receiver(call);
  if (receiver == kNoNode) return false;
  std::string dotted = dotted_text(tree_, receiver);
  std::string_view last = vocabulary::last_component(dotted);
  if (vocabulary::is_optimizer_name(last)) return true;
  // scaler.step(optimizer) with a GradScaler.
  return last.find("scaler") != std::string_view::npos && !positional_arguments(call).empty();
}

bool FileAnalysis::is_dataloader_constructor(NodeId call) const {
  return vocabulary::last_component(qualified_name(callee(call))) == "DataLoader";
}

bool FileAnalysis::is_torch_module_constructor(NodeId call) const {
  std::string q = qualified_name(callee(call));
  if (!(q.starts_with("torch.nn.") || q.starts_with("nn."))) return false;
  std::string_view last = vocabulary::last_component(q);
  if (!vocabulary::is_capitalized(last)) return false;
  return last != "Parameter" && last != "ParameterList" && last != "ParameterDict" &&
         last != "ModuleList" && last != "ModuleDict" && last != "Module";
}

}  // namespace gpuleak::lint
