#include "file_analysis.h"

#include <algorithm>
#include <cctype>

#include "graph_flow.h"
#include "training_loop.h"
#include "vocabulary.h"

namespace gpuleak::lint {
namespace {

// Names bound by a target pattern: identifiers, recursively through
// tuple/list patterns and splats (attributes and subscripts bind no name).
void bound_names(const SyntaxTree& tree, NodeId target, std::vector<std::string>& out) {
  for (NodeId name : bound_targets(tree, target)) {
    if (tree.kind(name) == NodeKind::kIdentifier) out.emplace_back(tree.text(name));
  }
}

}  // namespace

FileAnalysis::FileAnalysis(const SyntaxTree& tree)
    : tree_(tree), imports_(tree), bits_(tree.size(), 0), grad_disabled_(tree.size(), false) {
  collect_structure();
  collect_model_names();
  collect_hooks();
  collect_per_step();
  GraphFlow(*this).run();
}

FileAnalysis::~FileAnalysis() = default;

void FileAnalysis::collect_structure() {
  scope_of_node_.assign(tree_.size(), 0);
  Scope module;
  module.node = tree_.root();
  module.body = tree_.root();
  module.definition = tree_.root();
  module.name = "<module>";
  scopes_.push_back(std::move(module));

  struct OpenScope {
    std::size_t index;
    NodeId end;
  };
  std::vector<OpenScope> open{{0, static_cast<NodeId>(tree_.size())}};
  bool saw_backward = false;

  for (NodeId id = 0; id < tree_.size(); ++id) {
    while (open.size() > 1 && id >= open.back().end) open.pop_back();
    scope_of_node_[id] = static_cast<std::uint32_t>(open.back().index);
    NodeKind kind = tree_.kind(id);
    switch (kind) {
      case NodeKind::kDeleteStatement:
        deletes_.push_back(id);
        break;
      case NodeKind::kCall: {
        calls_.push_back(id);
        NodeId fn = callee(id);
        if (fn != kNoNode && tree_.kind(fn) == NodeKind::kAttribute) {
          NodeId attr = tree_.child_by_field(fn, Field::kAttributeName);
          if (attr != kNoNode && tree_.text(attr) == "backward") saw_backward = true;
          // `trainer.fit(...)`, `trainer.predict(...)`: Lightning (or a
          // Trainer on top of torch) driven from a file that imports only
          // its own project's modules.
          if (attr != kNoNode && (tree_.text(attr) == "fit" || tree_.text(attr) == "predict")) {
            NodeId object = tree_.child_by_field(fn, Field::kObject);
            std::string_view holder = object != kNoNode ? tree_.text(object) : std::string_view();
            std::size_t dot = holder.rfind('.');
            if (dot != std::string_view::npos) holder = holder.substr(dot + 1);
            if (holder == "trainer" || holder == "pl_trainer" || holder == "lightning_trainer") {
              saw_backward = true;
            }
          }
        }
        break;
      }
      case NodeKind::kClassDefinition: {
        ClassFacts facts;
        facts.node = id;
        NodeId name = tree_.child_by_field(id, Field::kName);
        if (name != kNoNode) facts.name = std::string(tree_.text(name));
        NodeId supers = tree_.child_by_field(id, Field::kSuperclasses);
        if (supers != kNoNode) {
          for (NodeId base : tree_.named_children(supers)) {
            if (tree_.kind(base) == NodeKind::kKeywordArgument) continue;
            std::string q = qualified_name(base);
            if (q.empty()) continue;
            std::string_view last = vocabulary::last_component(q);
            if (last == "LightningModule") facts.is_lightning = facts.is_module = true;
            if (last == "Module" && (q == "Module" || q.starts_with("torch.") ||
                                     q.starts_with("nn.") || q.find(".nn.") != std::string::npos)) {
              facts.is_module = true;
            }
            if (last == "Dataset" || last == "IterableDataset") facts.is_dataset = true;
            for (const ClassFacts& earlier : classes_) {
              if (earlier.name == q) {
                facts.is_module |= earlier.is_module;
                facts.is_dataset |= earlier.is_dataset;
                facts.is_lightning |= earlier.is_lightning;
              }
            }
            facts.bases.push_back(std::move(q));
          }
        }
        class_index_[id] = classes_.size();
        classes_.push_back(std::move(facts));
        break;
      }
      case NodeKind::kFunctionDefinition:
      case NodeKind::kLambda: {
        Scope s;
        s.node = id;
        s.body = tree_.child_by_field(id, Field::kBody);
        s.definition = id;
        NodeId parent = tree_.parent(id);
        if (kind == NodeKind::kFunctionDefinition) {
          NodeId name = tree_.child_by_field(id, Field::kName);
          s.name = name != kNoNode ? std::string(tree_.text(name)) : std::string("<function>");
          if (parent != kNoNode && tree_.kind(parent) == NodeKind::kDecoratedDefinition) {
            s.definition = parent;
            parent = tree_.parent(parent);
          }
          // A method: def directly in a class body.
          if (parent != kNoNode && tree_.kind(parent) == NodeKind::kBlock) {
            NodeId owner = tree_.parent(parent);
            if (owner != kNoNode && tree_.kind(owner) == NodeKind::kClassDefinition) {
              s.class_node = owner;
            }
          }
        } else {
          s.name = "<lambda>";
        }
        NodeId params = tree_.child_by_field(id, Field::kParametersField);
        if (params != kNoNode) {
          for (NodeId p : tree_.named_children(params)) {
            NodeId name_node = p;
            switch (tree_.kind(p)) {
              case NodeKind::kDefaultParameter:
              case NodeKind::kTypedDefaultParameter: {
                name_node = tree_.child_by_field(p, Field::kName);
                NodeId value = tree_.child_by_field(p, Field::kValue);
                if (name_node != kNoNode && value != kNoNode && is_mutable_container(value)) {
                  s.mutable_defaults.emplace(tree_.text(name_node));
                }
                break;
              }
              case NodeKind::kTypedParameter:
              case NodeKind::kListSplatPattern:
              case NodeKind::kDictionarySplatPattern:
                name_node = tree_.first_named_child(p);
                break;
              default:
                break;
            }
            if (name_node != kNoNode && tree_.kind(name_node) == NodeKind::kIdentifier) {
              s.parameters.emplace_back(tree_.text(name_node));
            }
          }
        }
        // Decorators that turn gradients off for the whole body.
        if (s.definition != id) {
          for (NodeId d : tree_.named_children(s.definition)) {
            if (tree_.kind(d) != NodeKind::kDecorator) continue;
            NodeId e = tree_.first_named_child(d);
            if (e != kNoNode && tree_.kind(e) == NodeKind::kCall) e = callee(e);
            std::string q = qualified_name(e);
            std::string_view last = vocabulary::last_component(q);
            // Projects wrap the choice in a decorator of their own, named for
            // it: YOLOv5's `@smart_inference_mode()` (inference_mode or no_grad).
            if (last.ends_with("no_grad") || last.ends_with("inference_mode")) {
              s.grad_disabled = true;
            }
          }
        }
        // The parent scope's binding of the name is recorded there.
        if (kind == NodeKind::kFunctionDefinition)
          scopes_[open.back().index].assigned.insert(s.name);
        std::size_t index = scopes_.size();
        scope_by_node_[id] = index;
        scopes_.push_back(std::move(s));
        open.push_back({index, tree_.node(id).subtree_end});
        break;
      }
      case NodeKind::kGlobalStatement:
      case NodeKind::kNonlocalStatement:
        for (NodeId n : tree_.named_children(id)) {
          scopes_[open.back().index].declared_global.emplace(tree_.text(n));
        }
        break;
      case NodeKind::kAssignment:
      case NodeKind::kAugmentedAssignment:
      case NodeKind::kForStatement:
      case NodeKind::kForInClause: {
        if (kind == NodeKind::kAssignment) {
          NodeId left = tree_.child_by_field(id, Field::kLeft);
          NodeId right = tree_.child_by_field(id, Field::kRight);
          if (left != kNoNode && tree_.kind(left) == NodeKind::kSubscript) {
            std::string holder = dotted_text(tree_, tree_.child_by_field(left, Field::kValue));
            if (!holder.empty()) slot_assignments_[holder].push_back(id);
          }
          if (left != kNoNode) {
            std::string target = dotted_text(tree_, left);
            if (!target.empty()) {
              if (right != kNoNode && tree_.kind(right) == NodeKind::kFalse) {
                switched_off_.emplace(vocabulary::last_component(target));
              }
              assignments_by_target_[target].push_back(id);
              scoped_assignments_[scoped_key(open.back().index, target)].push_back(id);
            }
          }
          if (left != kNoNode && right != kNoNode && tree_.kind(left) == NodeKind::kIdentifier &&
              tree_.kind(right) == NodeKind::kCall) {
            factory_calls_by_name_[std::string(tree_.text(left))].push_back(right);
          }
        }
        std::vector<std::string> names;
        bound_names(tree_, tree_.child_by_field(id, Field::kLeft), names);
        for (auto& n : names) scopes_[open.back().index].assigned.insert(std::move(n));
        break;
      }
      case NodeKind::kNamedExpression: {
        NodeId n = tree_.child_by_field(id, Field::kName);
        if (n != kNoNode) scopes_[open.back().index].assigned.emplace(tree_.text(n));
        break;
      }
      case NodeKind::kAsPatternTarget: {
        std::vector<std::string> names;
        for (NodeId c : tree_.named_children(id)) bound_names(tree_, c, names);
        for (auto& n : names) scopes_[open.back().index].assigned.insert(std::move(n));
        break;
      }
      default:
        break;
    }
  }
  // Two bytes per node instead of four when the scopes allow (all but files
  // with over 65 thousand functions and lambdas): this array is as long as
  // the node array, one of the largest of a large file.
  if (scopes_.size() <= 0xFFFF) {
    scope_of_node_narrow_.assign(scope_of_node_.begin(), scope_of_node_.end());
    std::vector<std::uint32_t>().swap(scope_of_node_);
  }
  for (std::size_t i = 1; i < scopes_.size(); ++i) scopes_by_name_[scopes_[i].name].push_back(i);
  for (NodeId call : calls_) calls_by_name_[std::string(callee_last_name(call))].push_back(call);
  // Lightning runs its evaluation hooks under no_grad/inference_mode.
  for (Scope& s : scopes_) {
    if (s.class_node == kNoNode) continue;
    const ClassFacts* c = class_facts(s.class_node);
    if (c != nullptr && c->is_lightning &&
        (s.name == "validation_step" || s.name == "test_step" || s.name == "predict_step")) {
      s.grad_disabled = true;
    }
  }
  uses_torch_ = imports_.imports_torch() || (saw_backward && !imports_.imports_other_autograd());
}

void FileAnalysis::collect_model_names() {
  // Two sweeps so that `net = model.to(device)` after `model = Net()` counts
  // regardless of the order the assignments were written in.
  for (int sweep = 0; sweep < 2; ++sweep) {
    for (NodeId id = 0; id < tree_.size(); ++id) {
      NodeKind kind = tree_.kind(id);
      if (kind == NodeKind::kCall) {
        std::string_view method = callee_last_name(id);
        NodeId receiver = method_receiver(id);
        if (receiver != kNoNode &&
            (method == "parameters" || method == "named_parameters" || method == "train" ||
             method == "eval" || method == "modules" || method == "named_modules" ||
             method == "children" || method == "register_forward_hook" ||
             method == "register_full_backward_hook")) {
          std::string key = dotted_text(tree_, receiver);
          if (!key.empty() && key != "self" && !vocabulary::is_optimizer_name(key)) {
            model_keys_.insert(key);
          }
        }
        continue;
      }
      if (kind != NodeKind::kAssignment) continue;
      NodeId left = tree_.child_by_field(id, Field::kLeft);
      NodeId right = tree_.child_by_field(id, Field::kRight);
      if (left == kNoNode || right == kNoNode || tree_.kind(right) != NodeKind::kCall) continue;
      std::string target = dotted_text(tree_, left);
      if (target.empty()) continue;
      NodeId fn = callee(right);
      std::string q = qualified_name(fn);
      std::string_view last = vocabulary::last_component(q);
      bool model = false;
      if (is_torch_module_constructor(right)) {
        if (last.ends_with("Loss")) {
          loss_keys_.insert(target);
        } else {
          model = true;
        }
      } else if (!last.empty() && vocabulary::is_capitalized(last)) {
        for (const ClassFacts& c : classes_) {
          if (c.name == last && c.is_module) model = true;
        }
        if (last == "DistributedDataParallel" || last == "DataParallel" ||
            last == "FullyShardedDataParallel" || last == "DDP" || last == "FSDP") {
          model = true;
        }
      } else if (q.starts_with("torchvision.models.") || q == "timm.create_model" ||
                 q == "torch.hub.load" || q == "torch.compile" || q == "torch.jit.script" ||
                 q == "torch.jit.trace") {
        model = true;
      } else if (last == "from_pretrained") {
        std::string owner(vocabulary::last_component(q.substr(0, q.size() - last.size() - 1)));
        model = owner.find("Tokenizer") == std::string::npos &&
                owner.find("Processor") == std::string::npos &&
                owner.find("Config") == std::string::npos &&
                owner.find("Extractor") == std::string::npos;
      }
      // A model moved, cast or switched mode is still the model.
      if (!model && (last == "to" || last == "cuda" || last == "half" || last == "float" ||
                     last == "eval" || last == "train" || last == "bfloat16" || last == "double")) {
        NodeId receiver = method_receiver(right);
        if (receiver != kNoNode && model_keys_.count(dotted_text(tree_, receiver))) model = true;
      }
      if (model) model_keys_.insert(target);
    }
  }
}

void FileAnalysis::collect_hooks() {
  hook_scope_.assign(scopes_.size(), 0);
  for (NodeId call : calls_) {
    std::string_view name = callee_last_name(call);
    if (name.substr(0, 9) != "register_" || name.find("hook") == std::string_view::npos) continue;
    std::vector<NodeId> args = positional_arguments(call);
    NodeId fn = !args.empty() ? args.front() : keyword_argument(call, "hook");
    if (fn == kNoNode) continue;
    hook_registrations_.push_back(call);
    for (std::size_t s : functions_passed_as(fn)) hook_scope_[s] = 1;
  }
}

bool FileAnalysis::is_mutable_container(NodeId value) const {
  switch (tree_.kind(value)) {
    case NodeKind::kList:
    case NodeKind::kDictionary:
    case NodeKind::kSet:
      return true;
    case NodeKind::kCall: {
      std::string qualified = qualified_name(callee(value));
      std::string_view last = vocabulary::last_component(qualified);
      if (last == "deque") return keyword_argument(value, "maxlen") == kNoNode;
      return last == "list" || last == "dict" || last == "set" || last == "defaultdict" ||
             last == "OrderedDict";
    }
    default:
      return false;
  }
}

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

void FileAnalysis::collect_per_step() {
  per_step_.assign(scopes_.size(), 0);
  for (std::size_t i = 1; i < scopes_.size(); ++i) {
    if (hook_scope_[i] || is_per_step_function(scopes_[i])) per_step_[i] = 1;
  }
  // Calls from a step loop, or from a function that runs per step, three
  // calls deep at most (train -> step -> log -> meter.update).
  std::unordered_map<NodeId, bool> step_loop;
  auto in_step_loop = [&](NodeId call) {
    for (NodeId l = innermost_loop(call); l != kNoNode; l = outer_loop(l)) {
      auto it = step_loop.find(l);
      if (it == step_loop.end()) it = step_loop.emplace(l, is_step_loop(*this, l)).first;
      if (it->second) return true;
    }
    return false;
  };
  for (int depth = 0; depth < 3; ++depth) {
    bool changed = false;
    for (NodeId call : calls_) {
      std::vector<std::size_t> targets = callees_of(call);
      if (targets.empty()) continue;
      bool from_step = per_step_[scope_index_of(call)] != 0 || in_step_loop(call);
      if (!from_step) continue;
      for (std::size_t s : targets) {
        if (!per_step_[s]) {
          per_step_[s] = 1;
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
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

NodeId FileAnalysis::first_assigned_value(const std::string& dotted) const {
  if (dotted.empty()) return kNoNode;
  const std::vector<NodeId>& all = assignments_to(dotted);
  return all.empty() ? kNoNode : tree_.child_by_field(all.front(), Field::kRight);
}

const std::vector<NodeId>& FileAnalysis::slot_assignments_to(const std::string& dotted) const {
  static const std::vector<NodeId> kNone;
  auto it = slot_assignments_.find(dotted);
  return it == slot_assignments_.end() ? kNone : it->second;
}

const std::vector<NodeId>& FileAnalysis::assignments_to(const std::string& dotted) const {
  static const std::vector<NodeId> kNone;
  auto it = assignments_by_target_.find(dotted);
  return it == assignments_by_target_.end() ? kNone : it->second;
}

std::string FileAnalysis::scoped_key(std::size_t scope, std::string_view dotted) {
  std::string key = std::to_string(scope);
  key += ':';
  key += dotted;
  return key;
}

const std::vector<NodeId>& FileAnalysis::assignments_in_scope(std::string_view dotted,
                                                              std::size_t scope) const {
  static const std::vector<NodeId> kNone;
  auto it = scoped_assignments_.find(scoped_key(scope, dotted));
  return it == scoped_assignments_.end() ? kNone : it->second;
}

NodeId FileAnalysis::last_assignment_before(std::string_view dotted, NodeId at,
                                            std::size_t scope) const {
  // In source order per scope: a binary search, however often the name is
  // bound elsewhere in a large file.
  auto it = scoped_assignments_.find(scoped_key(scope, dotted));
  if (it == scoped_assignments_.end()) return kNoNode;
  const std::vector<NodeId>& all = it->second;
  auto end = std::lower_bound(all.begin(), all.end(), at);
  return end == all.begin() ? kNoNode : *(end - 1);
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
