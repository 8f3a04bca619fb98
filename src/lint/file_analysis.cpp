// FileAnalysis, built: one walk over the tree records scopes, loops, calls,
// assignments and stores (collect_structure), then which names are models,
// which functions are hooks and which run once per step; GraphFlow adds what
// each value carries. The queries are in file_analysis_{calls,assignments,
// models,scopes}.cpp.
#include "file_analysis.h"

#include <algorithm>

#include "graph_flow.h"
#include "training_loop.h"
#include "vocabulary.h"

namespace gpuleak::lint {

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

}  // namespace gpuleak::lint
