#include "graph_flow.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "cuda_use.h"
#include "store_growth.h"
#include "vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr std::uint8_t kTensorBits = kCarriesGraph | kDeviceTensor;
constexpr std::uint8_t kFirstParameterBit = 0x10;
constexpr int kMaxRounds = 4;
constexpr std::uint8_t kParameterBits = 0xF0;
constexpr std::size_t kTrackedParameters = 4;
// Nested loops are walked twice each; beyond this depth once, which bounds
// the work on pathological nesting at the price of missing facts carried
// around very deep loops.
constexpr int kMaxLoopDepthWalkedTwice = 4;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

bool is_capitalized(std::string_view s) {
  return !s.empty() && std::isupper(static_cast<unsigned char>(s.front()));
}

// weakref.ref(x), StorageWeakRefWrapper(x), TensorWeakRef(x): the referent is
// not kept alive by the result.
bool is_weak_reference(std::string_view qualified) {
  constexpr std::string_view kWord = "weakref";
  for (std::size_t i = 0; i + kWord.size() <= qualified.size(); ++i) {
    std::size_t j = 0;
    while (j < kWord.size() &&
           std::tolower(static_cast<unsigned char>(qualified[i + j])) == kWord[j]) {
      ++j;
    }
    if (j == kWord.size()) return true;
  }
  return false;
}

// Methods whose result is a Python value, not a tensor.
bool returns_python_value(std::string_view method) {
  return one_of(method, {"item",          "tolist",       "numpy",         "__float__", "__int__",
                         "size",          "dim",          "numel",         "nelement",  "stride",
                         "data_ptr",      "element_size", "is_contiguous", "equal",     "backward",
                         "register_hook", "get_device",   "__len__",       "__repr__",  "__str__",
                         "__format__",    "keys"});
}

// Methods whose result is an integer or boolean tensor: no grad_fn.
bool returns_tensor_without_graph(std::string_view method) {
  return one_of(method, {"argmax", "argmin",      "eq",          "ne",         "lt",
                         "gt",     "le",          "ge",          "long",       "int",
                         "bool",   "byte",        "short",       "nonzero",    "isnan",
                         "isinf",  "isfinite",    "any",         "all",        "argsort",
                         "eq_",    "logical_not", "logical_and", "logical_or", "count_nonzero",
                         "unique"});
}

// Container methods that put their argument into the receiver.
bool is_append_method(std::string_view method) {
  // Not add(): on tensors and quantized functionals it is arithmetic. Not
  // put(): a queue hands the value to its consumer.
  return one_of(method, {"append", "appendleft"});
}

}  // namespace

GraphFlow::GraphFlow(FileAnalysis& file) : file_(file), tree_(file.tree()) {}

void GraphFlow::run() {
  std::size_t n = file_.scopes_.size();
  parameter_sinks_.assign(n, 0);
  learnt_.returns.assign(n, 0);
  learnt_.return_elements.assign(n, {});
  learnt_.arguments.assign(n, {});
  for (std::size_t i = 0; i < n; ++i) {
    learnt_.arguments[i].assign(file_.scopes_[i].parameters.size(), 0);
  }
  // Each round reads what the previous one learnt (returns, arguments,
  // class attributes); once a round learns nothing new the facts are final.
  for (int round = 0; round < kMaxRounds; ++round) {
    next_ = learnt_;
    std::fill(next_.returns.begin(), next_.returns.end(), 0);
    for (auto& e : next_.return_elements) e.clear();
    for (std::size_t i = 0; i < n; ++i) analyze_scope(i);
    bool stable = next_ == learnt_;
    learnt_ = std::move(next_);
    if (disable_grad_in_private_functions()) stable = false;
    if (stable && round > 0) break;
  }
}

bool GraphFlow::disable_grad_in_private_functions() {
  // `_generate_speech(...)` called only from `@torch.no_grad() def generate(...)`:
  // a private function (leading underscore: not called from outside the file
  // by convention) runs with gradients off when every call of it in the file
  // does, and it is never passed as a value (`executor.submit(_work)`).
  std::unordered_map<std::string_view, bool> candidates;  // name -> may run with grad
  for (std::size_t i = 1; i < file_.scopes_.size(); ++i) {
    const Scope& scope = file_.scopes_[i];
    if (scope.grad_disabled || scope.name.size() < 2 || scope.name[0] != '_' ||
        scope.name[1] == '_' || tree_.kind(scope.node) != NodeKind::kFunctionDefinition) {
      continue;
    }
    candidates.emplace(scope.name, false);
  }
  if (candidates.empty()) return false;
  if (!private_values_scanned_) {
    // Once per file: names used other than as a callee or a def's name.
    private_values_scanned_ = true;
    for (NodeId id = 0; id < tree_.size(); ++id) {
      if (tree_.kind(id) != NodeKind::kIdentifier) continue;
      auto it = candidates.find(tree_.text(id));
      if (it == candidates.end()) continue;
      NodeId expression = id;
      Field f = tree_.node(id).field;
      if (f == Field::kName) continue;  // def _name(...)
      if (f == Field::kAttributeName) expression = tree_.parent(id);
      NodeId parent = tree_.parent(expression);
      bool callee = parent != kNoNode && tree_.kind(parent) == NodeKind::kCall &&
                    tree_.node(expression).field == Field::kFunction;
      if (!callee) passed_as_value_.insert(std::string(tree_.text(id)));
    }
  }
  bool changed = false;
  for (std::size_t i = 1; i < file_.scopes_.size(); ++i) {
    Scope& scope = file_.scopes_[i];
    if (!candidates.count(scope.name) || passed_as_value_.count(scope.name)) continue;
    bool called = false;
    bool all_without_grad = true;
    for (NodeId call : file_.calls_named(scope.name)) {
      std::vector<std::size_t> targets = file_.callees_of(call);
      if (std::find(targets.begin(), targets.end(), i) == targets.end()) continue;
      called = true;
      if (!file_.grad_disabled_at(call)) all_without_grad = false;
    }
    if (called && all_without_grad) {
      scope.grad_disabled = true;
      changed = true;
    }
  }
  return changed;
}

std::uint8_t GraphFlow::strip_if_no_grad(std::uint8_t bits) const {
  return grad_enabled_ ? bits : static_cast<std::uint8_t>(bits & ~kCarriesGraph);
}

void GraphFlow::set(Env& env, const std::string& key, std::uint8_t bits) { env.assign(key, bits); }

void GraphFlow::join_with_checkpoint(Env& env, FlowEnvironment::Checkpoint at) {
  for (const auto& c : env.changes_since(at)) {
    env.restore(c.key, {c.before.bound || c.after.bound,
                        static_cast<std::uint8_t>(c.before.bits | c.after.bits)});
  }
}

void GraphFlow::analyze_scope(std::size_t index) {
  const Scope& scope = file_.scopes_[index];
  scope_ = index;
  grad_enabled_ = !scope.grad_disabled;
  loop_depth_ = 0;
  returned_ = 0;
  Env env;
  returned_elements_.clear();
  returns_only_tuples_ = true;
  collect_differentiated_names(index);
  // Mark the first parameters (after self) so stores can tell where a
  // value came from, and give them what the callers in this file pass.
  {
    std::size_t first = scope.class_node != kNoNode ? 1 : 0;
    const std::vector<std::uint8_t>& passed = learnt_.arguments[index];
    for (std::size_t p = first, bit = 0; p < scope.parameters.size(); ++p, ++bit) {
      std::uint8_t bits = p < passed.size() ? passed[p] : 0;
      if (bit < kTrackedParameters) bits |= static_cast<std::uint8_t>(kFirstParameterBit << bit);
      set(env, scope.parameters[p], bits);
    }
    // Attributes the class keeps tensors in, for every method.
    if (scope.class_node != kNoNode) {
      const ClassFacts* c = file_.class_facts(scope.class_node);
      if (c != nullptr) {
        std::string prefix = c->name + ".";
        for (const auto& [key, bits] : learnt_.class_attributes) {
          if (key.rfind(prefix, 0) == 0) env.add("self." + key.substr(prefix.size()), bits);
        }
      }
    }
  }
  if (file_.is_hook_scope(index)) {
    // hook(module, input, output) / hook(grad): the tensors it is handed.
    std::size_t first = scope.class_node != kNoNode ? 1 : 0;  // skip self
    std::size_t count = scope.parameters.size();
    if (count > first + 1) ++first;  // skip the module argument
    for (std::size_t p = first; p < count; ++p) env.add(scope.parameters[p], kDeviceTensor);
  }
  if (scope.node == tree_.root()) {
    walk_block(tree_.root(), env);
  } else if (tree_.kind(scope.node) == NodeKind::kLambda) {
    returned_ |= eval(scope.body, env);
    returns_only_tuples_ = false;
  } else if (scope.body != kNoNode) {
    walk_block(scope.body, env);
  }
  next_.returns[index] |= returned_;
  if (returns_only_tuples_ && !returned_elements_.empty()) {
    next_.return_elements[index] = returned_elements_;
  }
}

void GraphFlow::collect_differentiated_names(std::size_t index) {
  // `loss.backward()`, `out["loss"].backward()`, `autograd.backward(loss)`,
  // `accelerator.backward(loss)`, `scaler.scale(loss).backward()`: the root
  // name of what is differentiated holds a tensor with a graph.
  differentiated_.clear();
  const Scope& scope = file_.scopes_[index];
  NodeId root = scope.node;
  NodeId end = tree_.node(root).subtree_end;
  auto root_name = [&](NodeId e) {
    for (int guard = 0; e != kNoNode && guard < 16; ++guard) {
      NodeKind k = tree_.kind(e);
      if (k == NodeKind::kIdentifier) return std::string(tree_.text(e));
      if (k == NodeKind::kSubscript) {
        e = tree_.child_by_field(e, Field::kValue);
      } else if (k == NodeKind::kParenthesizedExpression) {
        e = tree_.first_named_child(e);
      } else if (k == NodeKind::kCall && file_.callee_last_name(e) == "scale") {
        std::vector<NodeId> a = file_.positional_arguments(e);
        e = a.empty() ? kNoNode : a.front();
      } else if (k == NodeKind::kAttribute) {
        std::string d = dotted_text(tree_, e);
        return d;
      } else {
        return std::string();
      }
    }
    return std::string();
  };
  for (NodeId id = root; id < end; ++id) {
    if (tree_.kind(id) != NodeKind::kCall || file_.scope_index_of(id) != index) continue;
    if (!file_.is_backward_call(id)) continue;
    NodeId target = kNoNode;
    NodeId receiver = file_.method_receiver(id);
    if (file_.callee_last_name(id) == "backward" && receiver != kNoNode &&
        file_.qualified_name(file_.callee(id)) != "torch.autograd.backward" &&
        !vocabulary::is_accelerator_name(dotted_text(tree_, receiver))) {
      target = receiver;
    } else {
      std::vector<NodeId> args = file_.positional_arguments(id);
      if (!args.empty()) target = args.front();
    }
    std::string name = root_name(target);
    if (name.empty() || name == "self") continue;
    // The value differentiated is the one bound last before the call.
    NodeId last = kNoNode;
    for (NodeId a : file_.assignments_to(name)) {
      if (a >= id) break;
      if (file_.scope_index_of(a) == index) last = a;
    }
    if (last != kNoNode) differentiated_.push_back(last);
  }
}

std::string GraphFlow::class_attribute_key(const std::string& dotted) const {
  // Only `self.name`, in a method.
  if (dotted.rfind("self.", 0) != 0 || dotted.find('.', 5) != std::string::npos) return {};
  const Scope& scope = file_.scopes_[scope_];
  if (scope.class_node == kNoNode) return {};
  const ClassFacts* c = file_.class_facts(scope.class_node);
  return c != nullptr ? c->name + "." + dotted.substr(5) : std::string();
}

std::uint8_t GraphFlow::captured_bits(NodeId function, const Env& env) const {
  if (env.empty() || function + 1 >= tree_.node(function).subtree_end) return 0;
  const Scope& inner = file_.scopes_[file_.scope_index_of(function + 1)];
  if (inner.node != function) return 0;
  auto own = [&](std::string_view name) {
    for (const auto& p : inner.parameters) {
      if (p == name) return true;
    }
    return inner.assigned.count(std::string(name)) != 0;
  };
  std::uint8_t bits = 0;
  for (NodeId id = function + 1; id < tree_.node(function).subtree_end; ++id) {
    if (tree_.kind(id) != NodeKind::kIdentifier) continue;
    Field f = tree_.node(id).field;
    if (f == Field::kAttributeName || f == Field::kName || f == Field::kParametersField) continue;
    std::string_view name = tree_.text(id);
    if (name == "self" || own(name)) continue;
    bits |= env.get(std::string(name)) & kTensorFacts;
  }
  return bits;
}

void GraphFlow::walk_block(NodeId block, Env& env) {
  for (NodeId s = tree_.first_child(block); s != kNoNode; s = tree_.next_sibling(s)) {
    if (!tree_.node(s).named || tree_.kind(s) == NodeKind::kComment) continue;
    walk_statement(s, env);
  }
}

void GraphFlow::walk_statement(NodeId statement, Env& env) {
  file_.grad_disabled_[statement] = grad_enabled_ ? 0 : 1;
  switch (tree_.kind(statement)) {
    case NodeKind::kExpressionStatement:
      for (NodeId part : tree_.named_children(statement)) {
        if (tree_.kind(part) == NodeKind::kAssignment) {
          walk_assignment(part, env);
        } else if (tree_.kind(part) == NodeKind::kAugmentedAssignment) {
          walk_augmented(part, env);
        } else {
          eval(part, env);
        }
      }
      return;
    case NodeKind::kReturnStatement: {
      NodeId value = tree_.first_named_child(statement);
      if (value != kNoNode) returned_ |= eval(value, env);
      // `return y_hat.detach(), loss.item()`: remember each element.
      NodeKind vk = value != kNoNode ? tree_.kind(value) : NodeKind::kNone;
      if (vk == NodeKind::kTuple || vk == NodeKind::kExpressionList) {
        std::vector<NodeId> parts = tree_.named_children(value);
        if (returned_elements_.empty()) returned_elements_.assign(parts.size(), 0);
        if (returned_elements_.size() != parts.size()) {
          returns_only_tuples_ = false;
        } else {
          for (std::size_t i = 0; i < parts.size(); ++i)
            returned_elements_[i] |= file_.bits_[parts[i]];
        }
      } else {
        returns_only_tuples_ = false;
      }
      return;
    }
    case NodeKind::kIfStatement:
      walk_if(statement, env);
      return;
    case NodeKind::kForStatement: {
      std::uint8_t iterated = eval(tree_.child_by_field(statement, Field::kRight), env);
      NodeId body = tree_.child_by_field(statement, Field::kBody);
      NodeId left = tree_.child_by_field(statement, Field::kLeft);
      // `for out in outputs`: elements of a list of carriers are carriers.
      FlowEnvironment::Checkpoint entry = env.open();
      bind_loop_targets(left, tree_.child_by_field(statement, Field::kRight), iterated, env);
      if (body != kNoNode) walk_loop_body(body, env);
      join_with_checkpoint(env, entry);
      env.close(entry);
      NodeId alternative = tree_.child_by_field(statement, Field::kAlternative);
      if (alternative != kNoNode) walk_block(alternative, env);
      return;
    }
    case NodeKind::kWhileStatement: {
      eval(tree_.child_by_field(statement, Field::kCondition), env);
      NodeId body = tree_.child_by_field(statement, Field::kBody);
      if (body != kNoNode) walk_loop_body(body, env);
      NodeId alternative = tree_.child_by_field(statement, Field::kAlternative);
      if (alternative != kNoNode) walk_block(alternative, env);
      return;
    }
    case NodeKind::kTryStatement:
      walk_try(statement, env);
      return;
    case NodeKind::kWithStatement:
      walk_with(statement, env);
      return;
    case NodeKind::kFunctionDefinition: {
      // A nested def is a closure over what it reads from this scope.
      NodeId name = tree_.child_by_field(statement, Field::kName);
      if (name != kNoNode) {
        std::uint8_t captured = scope_ != 0 ? captured_bits(statement, env) : 0;
        set(env, std::string(tree_.text(name)), captured);
      }
      return;
    }
    case NodeKind::kDecoratedDefinition: {
      NodeId def = tree_.child_by_field(statement, Field::kDefinition);
      if (def != kNoNode) walk_statement(def, env);
      return;
    }
    case NodeKind::kClassDefinition: {
      NodeId body = tree_.child_by_field(statement, Field::kBody);
      if (body != kNoNode) walk_block(body, env);
      return;
    }
    case NodeKind::kDeleteStatement:
      for (NodeId target : tree_.named_children(statement)) {
        std::vector<NodeId> targets{target};
        if (tree_.kind(target) == NodeKind::kExpressionList) targets = tree_.named_children(target);
        for (NodeId t : targets) env.erase(dotted_text(tree_, t));
      }
      return;
    case NodeKind::kMatchStatement: {
      FlowEnvironment::Checkpoint start = env.open();
      BranchUnion result;
      for (NodeId id = statement + 1; id < tree_.node(statement).subtree_end; ++id) {
        if (tree_.kind(id) != NodeKind::kBlock) continue;
        NodeId owner = tree_.parent(id);
        if (owner == kNoNode || tree_.parent(owner) == kNoNode ||
            tree_.parent(tree_.parent(owner)) != statement) {
          continue;  // only the case bodies directly in this match
        }
        walk_block(id, env);
        result.add_branch(env.changes_since(start));
        env.rollback_to(start);
      }
      result.apply(env, true);
      env.close(start);
      return;
    }
    case NodeKind::kGlobalStatement:
    case NodeKind::kNonlocalStatement:
    case NodeKind::kImportStatement:
    case NodeKind::kImportFromStatement:
    case NodeKind::kFutureImportStatement:
    case NodeKind::kComment:
      return;
    default:
      for (NodeId c : tree_.named_children(statement)) {
        if (tree_.kind(c) == NodeKind::kBlock) {
          walk_block(c, env);
        } else {
          eval(c, env);
        }
      }
      return;
  }
}

std::optional<GraphFlow::TensorTest> GraphFlow::tensor_test(NodeId condition) const {
  while (condition != kNoNode && tree_.kind(condition) == NodeKind::kParenthesizedExpression) {
    condition = tree_.first_named_child(condition);
  }
  if (condition == kNoNode) return std::nullopt;
  NodeKind k = tree_.kind(condition);
  if (k == NodeKind::kCall && file_.qualified_name(file_.callee(condition)) == "isinstance") {
    std::vector<NodeId> args = file_.positional_arguments(condition);
    if (args.size() != 2 || tree_.text(args[1]).find("Tensor") == std::string_view::npos) {
      return std::nullopt;
    }
    std::string name = dotted_text(tree_, args[0]);
    if (name.empty()) return std::nullopt;
    return TensorTest{name, false};
  }
  if (k == NodeKind::kNotOperator) {
    std::optional<TensorTest> inner = tensor_test(tree_.first_named_child(condition));
    if (inner) inner->true_means_not_tensor = !inner->true_means_not_tensor;
    return inner;
  }
  if (k == NodeKind::kComparisonOperator) {
    // `x is None`: true means no tensor.
    std::vector<NodeId> parts = tree_.named_children(condition);
    if (parts.size() == 2 && tree_.kind(parts[1]) == NodeKind::kNone &&
        tree_.text(condition).find(" is not ") == std::string_view::npos &&
        tree_.text(condition).find(" is ") != std::string_view::npos) {
      std::string name = dotted_text(tree_, parts[0]);
      if (!name.empty()) return TensorTest{name, true};
    }
    return std::nullopt;
  }
  if (k == NodeKind::kBooleanOperator) {
    // `x is None or not isinstance(x, torch.Tensor)`: each side says no tensor.
    NodeId op = tree_.child_by_field(condition, Field::kOperator);
    if (op == kNoNode || tree_.text(op) != "or") return std::nullopt;
    std::optional<TensorTest> l = tensor_test(tree_.child_by_field(condition, Field::kLeft));
    std::optional<TensorTest> r = tensor_test(tree_.child_by_field(condition, Field::kRight));
    if (l && r && l->name == r->name && l->true_means_not_tensor && r->true_means_not_tensor) {
      return l;
    }
  }
  return std::nullopt;
}

void GraphFlow::walk_if(NodeId statement, Env& env) {
  NodeId condition = tree_.child_by_field(statement, Field::kCondition);
  eval(condition, env);
  // `if isinstance(out, torch.Tensor): ... else: <out is no tensor>`.
  std::optional<TensorTest> test = tensor_test(condition);
  FlowEnvironment::Checkpoint start = env.open();
  NodeId consequence = tree_.child_by_field(statement, Field::kConsequence);
  if (test && test->true_means_not_tensor) env.erase(test->name);
  if (consequence != kNoNode) walk_block(consequence, env);
  BranchUnion result;
  result.add_branch(env.changes_since(start));
  env.rollback_to(start);
  bool has_else = false;
  for (NodeId c = tree_.first_child(statement); c != kNoNode; c = tree_.next_sibling(c)) {
    if (tree_.node(c).field != Field::kAlternative) continue;
    if (test && !test->true_means_not_tensor) env.erase(test->name);
    if (tree_.kind(c) == NodeKind::kElifClause) {
      eval(tree_.child_by_field(c, Field::kCondition), env);
      NodeId body = tree_.child_by_field(c, Field::kConsequence);
      if (body != kNoNode) walk_block(body, env);
    } else {
      has_else = true;
      NodeId body = tree_.child_by_field(c, Field::kBody);
      if (body != kNoNode) walk_block(body, env);
    }
    result.add_branch(env.changes_since(start));
    env.rollback_to(start);
  }
  result.apply(env, !has_else);
  env.close(start);
}

void GraphFlow::walk_try(NodeId statement, Env& env) {
  FlowEnvironment::Checkpoint start = env.open();
  NodeId body = tree_.child_by_field(statement, Field::kBody);
  if (body != kNoNode) walk_block(body, env);
  FlowEnvironment::Checkpoint after_body = env.open();
  BranchUnion result;
  NodeId finally_block = kNoNode;
  for (NodeId c = tree_.first_child(statement); c != kNoNode; c = tree_.next_sibling(c)) {
    NodeKind k = tree_.kind(c);
    if (k == NodeKind::kExceptClause || k == NodeKind::kExceptGroupClause) {
      // The handler may start from any point of the body: what it starts
      // with is the union of the states before and after the body.
      Env& handler = env;
      join_with_checkpoint(handler, start);
      NodeId alias = tree_.child_by_field(c, Field::kAlias);
      NodeId value = tree_.child_by_field(c, Field::kValue);
      if (value != kNoNode) {
        if (tree_.kind(value) == NodeKind::kAsPattern) {
          // Older grammar shape: `except E as e` as one as_pattern.
          NodeId target = tree_.child_by_field(value, Field::kAlias);
          if (target != kNoNode) {
            for (NodeId n : tree_.named_children(target)) bind_pattern(n, kException, handler);
          }
        } else {
          eval(value, handler);
        }
      }
      if (alias != kNoNode) bind_pattern(alias, kException, handler);
      for (NodeId b : tree_.named_children(c)) {
        if (tree_.kind(b) == NodeKind::kBlock) walk_block(b, handler);
      }
      result.add_branch(env.changes_since(after_body));
      env.rollback_to(after_body);
    } else if (k == NodeKind::kElseClause) {
      NodeId b = tree_.child_by_field(c, Field::kBody);
      if (b == kNoNode) b = tree_.first_named_child(c);
      if (b != kNoNode) walk_block(b, env);
      result.add_branch(env.changes_since(after_body));
      env.rollback_to(after_body);
    } else if (k == NodeKind::kFinallyClause) {
      finally_block = c;
    }
  }
  result.apply(env, true);
  env.close(after_body);
  env.close(start);
  if (finally_block != kNoNode) {
    for (NodeId b : tree_.named_children(finally_block)) {
      if (tree_.kind(b) == NodeKind::kBlock) walk_block(b, env);
    }
  }
}

void GraphFlow::walk_with(NodeId statement, Env& env) {
  bool saved = grad_enabled_;
  for (NodeId clause : tree_.named_children(statement)) {
    if (tree_.kind(clause) != NodeKind::kWithClause) continue;
    for (NodeId item : tree_.named_children(clause)) {
      if (tree_.kind(item) != NodeKind::kWithItem) continue;
      NodeId value = tree_.child_by_field(item, Field::kValue);
      if (value == kNoNode) continue;
      NodeId expression = value;
      NodeId alias = kNoNode;
      if (tree_.kind(value) == NodeKind::kAsPattern) {
        expression = tree_.first_named_child(value);
        alias = tree_.child_by_field(value, Field::kAlias);
      }
      std::uint8_t bits = eval(expression, env);
      // Gradient mode switches: no_grad(), inference_mode(), enable_grad(),
      // set_grad_enabled(flag).
      NodeId fn = tree_.kind(expression) == NodeKind::kCall ? file_.callee(expression) : expression;
      std::string q = file_.qualified_name(fn);
      std::string_view last = vocabulary::last_component(q);
      if (last == "no_grad" || last == "inference_mode") {
        bool disables = true;
        if (last == "inference_mode" && tree_.kind(expression) == NodeKind::kCall) {
          std::vector<NodeId> args = file_.positional_arguments(expression);
          NodeId flag = !args.empty() ? args.front() : file_.keyword_argument(expression, "mode");
          if (flag != kNoNode && tree_.kind(flag) == NodeKind::kFalse) disables = false;
        }
        if (disables) grad_enabled_ = false;
      } else if (last == "enable_grad") {
        grad_enabled_ = true;
      } else if (last == "set_grad_enabled" && tree_.kind(expression) == NodeKind::kCall) {
        std::vector<NodeId> args = file_.positional_arguments(expression);
        NodeId flag = !args.empty() ? args.front() : file_.keyword_argument(expression, "mode");
        // Only a literal False is known to disable; `phase == "train"` may not.
        grad_enabled_ = !(flag != kNoNode && tree_.kind(flag) == NodeKind::kFalse);
      }
      if (alias != kNoNode) {
        for (NodeId target : tree_.named_children(alias)) {
          assign_target(target, expression, bits, env, item);
        }
      }
    }
  }
  NodeId body = tree_.child_by_field(statement, Field::kBody);
  if (body != kNoNode) walk_block(body, env);
  grad_enabled_ = saved;
}

void GraphFlow::walk_loop_body(NodeId body, Env& env) {
  FlowEnvironment::Checkpoint entry = env.open();
  ++loop_depth_;
  walk_block(body, env);
  if (loop_depth_ <= kMaxLoopDepthWalkedTwice) {
    bool grows = false;
    for (const auto& c : env.changes_since(entry)) {
      grows |= (c.after.bound && !c.before.bound) || (c.after.bits & ~c.before.bits) != 0;
    }
    if (grows) {
      // Something new reaches the next iteration: walk again with it.
      join_with_checkpoint(env, entry);
      walk_block(body, env);
    }
  }
  --loop_depth_;
  join_with_checkpoint(env, entry);
  env.close(entry);
}

void GraphFlow::walk_assignment(NodeId assignment, Env& env) {
  std::vector<NodeId> targets;
  NodeId value = assignment;
  // a = b = value: collect every target of the chain.
  while (value != kNoNode && tree_.kind(value) == NodeKind::kAssignment) {
    NodeId left = tree_.child_by_field(value, Field::kLeft);
    if (left != kNoNode) targets.push_back(left);
    value = tree_.child_by_field(value, Field::kRight);
  }
  if (value == kNoNode) return;  // annotation only: `x: int`
  if (tree_.kind(value) == NodeKind::kAugmentedAssignment) {
    walk_augmented(value, env);
    return;
  }
  std::uint8_t bits = eval(value, env);
  for (NodeId target : targets) {
    if (targets.size() == 1) {
      std::uint8_t other_bits = 0;
      NodeId other = self_update_operand(target, value, other_bits);
      if (other != kNoNode) {
        record_store(StoreKind::kSelfUpdate, assignment, target, kNoNode, other, other_bits);
        set(env, dotted_text(tree_, target), bits);
        continue;
      }
    }
    assign_target(target, value, bits, env, assignment);
  }
}

void GraphFlow::walk_augmented(NodeId assignment, Env& env) {
  NodeId left = tree_.child_by_field(assignment, Field::kLeft);
  NodeId right = tree_.child_by_field(assignment, Field::kRight);
  if (left == kNoNode || right == kNoNode) return;
  std::uint8_t right_bits = eval(right, env);
  std::uint8_t left_bits = eval(left, env);
  NodeKind rk = tree_.kind(right);
  bool list_like =
      rk == NodeKind::kList || rk == NodeKind::kTuple || rk == NodeKind::kListComprehension;
  // `total += loss` under no_grad computes a new value without a graph;
  // `outputs += [out]` keeps the very objects, graph and all.
  std::uint8_t effective = list_like ? right_bits : strip_if_no_grad(right_bits);
  if (tree_.kind(left) == NodeKind::kSubscript) {
    record_store(StoreKind::kSubscriptAugmented, assignment,
                 tree_.child_by_field(left, Field::kValue),
                 tree_.child_by_field(left, Field::kSubscriptIndex), right, effective);
  } else {
    record_store(StoreKind::kAugmented, assignment, left, kNoNode, right, effective);
  }
  set(env, dotted_text(tree_, left), static_cast<std::uint8_t>(left_bits | effective));
}

void GraphFlow::bind_pattern(NodeId target, std::uint8_t bits, Env& env) {
  for (NodeId name : bound_targets(tree_, target)) set(env, dotted_text(tree_, name), bits);
}

void GraphFlow::bind_loop_targets(NodeId target, NodeId iterable, std::uint8_t bits, Env& env) {
  // `for i, out in enumerate(outputs)`: the first name counts, it is an int.
  if (target != kNoNode && iterable != kNoNode && tree_.kind(iterable) == NodeKind::kCall &&
      file_.qualified_name(file_.callee(iterable)) == "enumerate") {
    NodeKind k = tree_.kind(target);
    if (k == NodeKind::kPatternList || k == NodeKind::kTuplePattern || k == NodeKind::kTuple ||
        k == NodeKind::kExpressionList) {
      std::vector<NodeId> parts = tree_.named_children(target);
      if (parts.size() == 2) {
        bind_pattern(parts[0], 0, env);
        bind_pattern(parts[1], bits, env);
        return;
      }
    }
  }
  bind_pattern(target, bits, env);
}

void GraphFlow::assign_target(NodeId target, NodeId value, std::uint8_t bits, Env& env,
                              NodeId site) {
  if (target == kNoNode) return;
  switch (tree_.kind(target)) {
    case NodeKind::kIdentifier: {
      std::string name(tree_.text(target));
      const Scope& scope = file_.scopes_[scope_];
      // Whatever produced it, a name this function differentiates holds a
      // tensor with a graph (`total = sum(losses); total.backward()`).
      if (grad_enabled_ && !(bits & kCarriesGraph) && !(bits & kException) &&
          std::find(differentiated_.begin(), differentiated_.end(), site) !=
              differentiated_.end()) {
        bits |= kTensorBits;
      }
      if (scope_ != 0 && scope.declared_global.count(name)) {
        if (bits != 0) record_store(StoreKind::kGlobalName, site, target, kNoNode, value, bits);
      } else if (bits & kException) {
        record_store(StoreKind::kLocalName, site, target, kNoNode, value, bits);
      }
      set(env, name, bits);
      file_.bits_[target] = bits;
      return;
    }
    case NodeKind::kAttribute: {
      eval(tree_.child_by_field(target, Field::kObject), env);
      if (bits != 0) record_store(StoreKind::kAttribute, site, target, kNoNode, value, bits);
      std::string dotted = dotted_text(tree_, target);
      set(env, dotted, bits);
      file_.bits_[target] = bits;
      // `self.probe = nn.Parameter(... device="cuda")`: every method of the
      // class sees a GPU tensor there (not a graph: that is per call).
      std::string key = class_attribute_key(dotted);
      if (!key.empty() && (bits & kDeviceTensor)) {
        next_.class_attributes[key] |= bits & (kDeviceTensor | kNonScalar);
      }
      return;
    }
    case NodeKind::kSubscript: {
      NodeId container = tree_.child_by_field(target, Field::kValue);
      NodeId key = tree_.child_by_field(target, Field::kSubscriptIndex);
      eval(container, env);
      if (key != kNoNode) eval(key, env);
      record_store(StoreKind::kSubscript, site, container, key, value, bits);
      std::string holder = dotted_text(tree_, container);
      if (!holder.empty()) env.add(holder, bits);
      return;
    }
    case NodeKind::kPatternList:
    case NodeKind::kTuplePattern:
    case NodeKind::kListPattern:
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kParenthesizedExpression:
    case NodeKind::kExpressionList: {
      std::vector<NodeId> elements = tree_.named_children(target);
      std::vector<NodeId> values;
      if (value != kNoNode) {
        NodeKind vk = tree_.kind(value);
        if (vk == NodeKind::kTuple || vk == NodeKind::kExpressionList || vk == NodeKind::kList ||
            vk == NodeKind::kPatternList) {
          values = tree_.named_children(value);
        }
      }
      bool pairwise = values.size() == elements.size();
      std::vector<std::uint8_t> from_summary;
      if (!pairwise && value != kNoNode && tree_.kind(value) == NodeKind::kCall) {
        from_summary = same_file_return_elements(value, elements.size());
      }
      for (std::size_t i = 0; i < elements.size(); ++i) {
        if (pairwise) {
          assign_target(elements[i], values[i], file_.bits_[values[i]], env, site);
        } else if (!from_summary.empty()) {
          assign_target(elements[i], value, strip_if_no_grad(from_summary[i]), env, site);
        } else {
          assign_target(elements[i], value, bits, env, site);
        }
      }
      return;
    }
    case NodeKind::kListSplatPattern:
    case NodeKind::kListSplat: {
      NodeId inner = tree_.first_named_child(target);
      if (inner != kNoNode) assign_target(inner, value, bits, env, site);
      return;
    }
    default:
      return;
  }
}

NodeId GraphFlow::self_update_operand(NodeId target, NodeId value, std::uint8_t& other_bits) const {
  std::string self = dotted_text(tree_, target);
  if (self.empty()) return kNoNode;
  while (tree_.kind(value) == NodeKind::kParenthesizedExpression) {
    value = tree_.first_named_child(value);
    if (value == kNoNode) return kNoNode;
  }
  std::vector<NodeId> operands;
  if (tree_.kind(value) == NodeKind::kBinaryOperator) {
    // Flatten `total + a + b` into its operands.
    std::vector<NodeId> stack{value};
    while (!stack.empty()) {
      NodeId n = stack.back();
      stack.pop_back();
      if (tree_.kind(n) == NodeKind::kBinaryOperator) {
        NodeId op = tree_.child_by_field(n, Field::kOperator);
        std::string_view o = op != kNoNode ? tree_.text(op) : std::string_view();
        if (o != "+" && o != "-" && o != "*" && o != "/") return kNoNode;
        stack.push_back(tree_.child_by_field(n, Field::kRight));
        stack.push_back(tree_.child_by_field(n, Field::kLeft));
      } else if (n != kNoNode) {
        operands.push_back(n);
      }
    }
  } else if (tree_.kind(value) == NodeKind::kCall) {
    std::string qualified = file_.qualified_name(file_.callee(value));
    std::string_view last = vocabulary::last_component(qualified);
    if (!one_of(last, {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "add"})) {
      return kNoNode;
    }
    std::vector<NodeId> args = file_.positional_arguments(value);
    if (args.empty()) return kNoNode;
    NodeKind k0 = tree_.kind(args[0]);
    if (k0 == NodeKind::kList || k0 == NodeKind::kTuple) {
      operands = tree_.named_children(args[0]);
    } else {
      operands = args;
    }
  } else {
    return kNoNode;
  }
  bool has_self = false;
  NodeId other = kNoNode;
  for (NodeId o : operands) {
    if (dotted_text(tree_, o) == self) {
      has_self = true;
    } else {
      other_bits |= file_.bits_[o];
      if (other == kNoNode) other = o;
    }
  }
  return has_self ? other : kNoNode;
}

void GraphFlow::record_store(StoreKind kind, NodeId site, NodeId container, NodeId key,
                             NodeId value, std::uint8_t bits, std::size_t keeper) {
  if ((bits & kParameterBits) && !(bits & kValueBits) && container != kNoNode &&
      kind != StoreKind::kLocalName && kind != StoreKind::kAttribute &&
      kind != StoreKind::kGlobalName && is_long_lived_container(container) &&
      (kind != StoreKind::kSubscript || key_varies_per_step(file_, key))) {
    std::string path = container_path(file_, container);
    auto memo = bounded_containers_.find(path);
    if (memo == bounded_containers_.end()) {
      memo = bounded_containers_.emplace(path, container_bounded_elsewhere(file_, path)).first;
    }
    if (!memo->second) {
      parameter_sinks_[scope_] |= static_cast<std::uint8_t>((bits & kParameterBits) >> 4);
      any_parameter_sinks_ = true;
    }
  }
  bits &= kValueBits;
  if (bits == 0 && kind != StoreKind::kAppend && kind != StoreKind::kExtend &&
      kind != StoreKind::kAugmented && kind != StoreKind::kSubscript &&
      kind != StoreKind::kSubscriptAugmented && kind != StoreKind::kSelfUpdate) {
    return;
  }
  StoreEvent event;
  event.kind = kind;
  event.site = site;
  event.container = container;
  event.key = key;
  event.value = value;
  event.value_bits = bits;
  event.grad_enabled = grad_enabled_;
  event.scope = scope_;
  event.keeping_function = keeper;
  {
    NodeId v = value;
    while (v != kNoNode && tree_.kind(v) == NodeKind::kParenthesizedExpression) {
      v = tree_.first_named_child(v);
    }
    if (v != kNoNode) {
      NodeKind vk = tree_.kind(v);
      if (vk == NodeKind::kLambda) {
        event.closure = true;
      } else if (vk == NodeKind::kIdentifier) {
        for (std::size_t f : file_.scopes_named(tree_.text(v))) {
          if (file_.scopes_[f].node > file_.scopes_[scope_].node &&
              tree_.contains(file_.scopes_[scope_].node, file_.scopes_[f].node)) {
            event.closure = true;  // a def nested in this function
          }
        }
      } else if (vk == NodeKind::kCall) {
        std::string q = file_.qualified_name(file_.callee(v));
        event.closure = q == "functools.partial" || q == "partial";
      }
    }
  }
  NodeId identity = container != kNoNode ? container : site;
  auto [it, inserted] = store_index_.emplace(identity, file_.stores_.size());
  if (inserted) {
    file_.stores_.push_back(event);
  } else {
    // A later walk (second loop pass, second round) knows at least as much.
    file_.stores_[it->second] = event;
  }
}

bool GraphFlow::is_long_lived_container(NodeId container) const {
  // Reached through self, a `global`, or a name this function does not bind.
  NodeId n = container;
  while (n != kNoNode &&
         (tree_.kind(n) == NodeKind::kSubscript || tree_.kind(n) == NodeKind::kAttribute)) {
    n = tree_.kind(n) == NodeKind::kSubscript ? tree_.child_by_field(n, Field::kValue)
                                              : tree_.child_by_field(n, Field::kObject);
  }
  if (n == kNoNode || tree_.kind(n) != NodeKind::kIdentifier) return false;
  std::string root(tree_.text(n));
  const Scope& scope = file_.scopes_[scope_];
  if (root == "self" || root == "cls") return scope.class_node != kNoNode;
  if (scope.declared_global.count(root)) return true;
  if (scope_ == 0 || scope.assigned.count(root)) return false;
  for (const auto& p : scope.parameters) {
    if (p == root) return false;
  }
  return true;
}

void GraphFlow::record_stores_through_parameters(NodeId call,
                                                 const std::vector<NodeId>& positional) {
  if (!any_parameter_sinks_ || positional.empty()) return;
  std::uint8_t sinks = 0;
  std::size_t keeper = static_cast<std::size_t>(-1);
  for (std::size_t s : file_.callees_of(call)) {
    if (parameter_sinks_[s]) keeper = s;
    sinks |= parameter_sinks_[s];
  }
  if (sinks == 0) return;
  for (std::size_t i = 0; i < positional.size() && i < kTrackedParameters; ++i) {
    if (!(sinks & (1u << i))) continue;
    std::uint8_t bits = file_.bits_[positional[i]] & kValueBits;
    if (!(bits & kTensorBits)) continue;
    NodeId receiver = file_.method_receiver(call);
    record_store(StoreKind::kAppend, call, receiver != kNoNode ? receiver : file_.callee(call),
                 kNoNode, positional[i], bits, keeper);
  }
}

std::uint8_t GraphFlow::eval(NodeId e, Env& env) {
  if (e == kNoNode) return 0;
  std::uint8_t r = 0;
  switch (tree_.kind(e)) {
    case NodeKind::kIdentifier: {
      r = env.get(std::string(tree_.text(e)));
      break;
    }
    case NodeKind::kAttribute:
      r = eval_attribute(e, env);
      break;
    case NodeKind::kSubscript: {
      r = eval(tree_.child_by_field(e, Field::kValue), env);
      // sys.exc_info()[0] is the exception's type: it holds no frames.
      NodeId index = tree_.child_by_field(e, Field::kSubscriptIndex);
      if ((r & kException) && index != kNoNode && tree_.text(index) == "0") {
        r = static_cast<std::uint8_t>(r & ~kException);
      }
      for (NodeId c = tree_.first_child(e); c != kNoNode; c = tree_.next_sibling(c)) {
        if (tree_.node(c).field == Field::kSubscriptIndex) eval(c, env);
      }
      break;
    }
    case NodeKind::kCall:
      r = eval_call(e, env);
      break;
    case NodeKind::kBinaryOperator: {
      std::uint8_t left = eval(tree_.child_by_field(e, Field::kLeft), env);
      std::uint8_t right = eval(tree_.child_by_field(e, Field::kRight), env);
      NodeId l = tree_.child_by_field(e, Field::kLeft);
      // "%s" % loss formats a string.
      if (l != kNoNode && tree_.kind(l) == NodeKind::kString) {
        r = 0;
      } else {
        // Arithmetic passes tensors on, and which parameters they came from.
        r = strip_if_no_grad(
            static_cast<std::uint8_t>((left | right) & (kTensorFacts | kParameterBits)));
      }
      break;
    }
    case NodeKind::kUnaryOperator:
      r = strip_if_no_grad(eval(tree_.first_named_child(e), env) & (kTensorFacts | kParameterBits));
      break;
    case NodeKind::kBooleanOperator:
      r = static_cast<std::uint8_t>(eval(tree_.child_by_field(e, Field::kLeft), env) |
                                    eval(tree_.child_by_field(e, Field::kRight), env));
      break;
    case NodeKind::kNotOperator:
      eval(tree_.first_named_child(e), env);
      break;
    case NodeKind::kComparisonOperator: {
      std::uint8_t all = 0;
      for (NodeId c : tree_.named_children(e)) all |= eval(c, env);
      r = all & kDeviceTensor;  // a bool tensor has no graph
      break;
    }
    case NodeKind::kConditionalExpression: {
      std::vector<NodeId> parts = tree_.named_children(e);
      // `x.item() if isinstance(x, torch.Tensor) else x`: the else part is no tensor.
      std::optional<TensorTest> test =
          parts.size() == 3 ? tensor_test(parts[1]) : std::optional<TensorTest>();
      for (std::size_t i = 0; i < parts.size(); ++i) {
        std::uint8_t b = 0;
        if (test &&
            ((i == 0 && test->true_means_not_tensor) || (i == 2 && !test->true_means_not_tensor))) {
          FlowEnvironment::Checkpoint before = env.open();
          env.erase(test->name);
          b = eval(parts[i], env);
          env.rollback_to(before);
          env.close(before);
        } else {
          b = eval(parts[i], env);
        }
        if (i != 1) r |= b;  // [then, condition, else]
      }
      break;
    }
    case NodeKind::kParenthesizedExpression:
    case NodeKind::kKeywordArgument:
    case NodeKind::kListSplat:
    case NodeKind::kDictionarySplat:
    case NodeKind::kAwait: {
      NodeId inner = tree_.kind(e) == NodeKind::kKeywordArgument
                         ? tree_.child_by_field(e, Field::kValue)
                         : tree_.first_named_child(e);
      r = eval(inner, env);
      break;
    }
    case NodeKind::kTuple:
    case NodeKind::kList:
    case NodeKind::kSet:
    case NodeKind::kExpressionList:
      for (NodeId c : tree_.named_children(e)) r |= eval(c, env);
      break;
    case NodeKind::kDictionary:
      for (NodeId c : tree_.named_children(e)) {
        if (tree_.kind(c) == NodeKind::kPair) {
          eval(tree_.child_by_field(c, Field::kKey), env);
          r |= eval(tree_.child_by_field(c, Field::kValue), env);
          file_.bits_[c] = r;
        } else {
          r |= eval(c, env);
        }
      }
      break;
    case NodeKind::kListComprehension:
    case NodeKind::kSetComprehension:
    case NodeKind::kGeneratorExpression:
    case NodeKind::kDictionaryComprehension:
      r = eval_comprehension(e, env);
      break;
    case NodeKind::kNamedExpression: {
      r = eval(tree_.child_by_field(e, Field::kValue), env);
      NodeId name = tree_.child_by_field(e, Field::kName);
      if (name != kNoNode) set(env, std::string(tree_.text(name)), r);
      break;
    }
    case NodeKind::kLambda:
      // A lambda holds what it captures: the closure keeps those tensors.
      r = captured_bits(e, env);
      break;
    case NodeKind::kString:
    case NodeKind::kConcatenatedString:
    case NodeKind::kInteger:
    case NodeKind::kFloat:
    case NodeKind::kTrue:
    case NodeKind::kFalse:
    case NodeKind::kNone:
    case NodeKind::kComment:
      break;
    default:
      for (NodeId c : tree_.named_children(e)) eval(c, env);
      break;
  }
  file_.bits_[e] = r;
  file_.grad_disabled_[e] = grad_enabled_ ? 0 : 1;
  return r;
}

std::uint8_t GraphFlow::eval_comprehension(NodeId e, Env& env) {
  std::vector<NodeId> parts = tree_.named_children(e);
  if (parts.empty()) return 0;
  // The comprehension's own names stay inside it: undone at the end.
  FlowEnvironment::Checkpoint outside = env.open();
  Env& inner = env;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    NodeId part = parts[i];
    if (tree_.kind(part) == NodeKind::kForInClause) {
      NodeId right = tree_.child_by_field(part, Field::kRight);
      std::uint8_t iterated = eval(right, inner);
      bind_loop_targets(tree_.child_by_field(part, Field::kLeft), right, iterated, inner);
    } else {
      eval(part, inner);
    }
  }
  NodeId body = parts[0];
  std::uint8_t v = 0;
  if (tree_.kind(body) == NodeKind::kPair) {
    eval(tree_.child_by_field(body, Field::kKey), inner);
    v = eval(tree_.child_by_field(body, Field::kValue), inner);
    file_.bits_[body] = v;
  } else {
    v = eval(body, inner);
  }
  env.rollback_to(outside);
  env.close(outside);
  return v;
}

std::uint8_t GraphFlow::eval_attribute(NodeId e, Env& env) {
  std::uint8_t object = eval(tree_.child_by_field(e, Field::kObject), env);
  std::string key = dotted_text(tree_, e);
  if (!key.empty()) {
    if (const std::uint8_t* bits = env.find(key)) return *bits;
  }
  NodeId attr = tree_.child_by_field(e, Field::kAttributeName);
  std::string_view name = attr != kNoNode ? tree_.text(attr) : std::string_view();
  if (one_of(name, {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf",
                    "layout", "names", "is_sparse", "itemsize", "nbytes"})) {
    return 0;
  }
  if (name == "data") return object & kDeviceTensor;
  if (name == "grad") return kDeviceTensor;  // gradients live where their parameters do
  if (one_of(name, {"__traceback__", "tb_frame", "tb_next", "__context__", "__cause__"})) {
    return object & kException;
  }
  if (object & kException) return 0;  // e.args, e.errno: plain values
  return object;
}

std::uint8_t GraphFlow::same_file_function_bits(NodeId call) const {
  std::uint8_t bits = 0;
  for (std::size_t s : file_.scopes_named(file_.callee_last_name(call))) {
    bits |= learnt_.returns[s];
  }
  // A function that returns what it caught hands it to its caller on
  // purpose; only tensors and graphs flow through summaries.
  return bits & kTensorFacts;
}

std::vector<std::uint8_t> GraphFlow::same_file_return_elements(NodeId call,
                                                               std::size_t count) const {
  std::vector<std::uint8_t> out;
  std::vector<std::size_t> scopes = file_.scopes_named(file_.callee_last_name(call));
  if (scopes.empty()) return out;
  for (std::size_t s : scopes) {
    const std::vector<std::uint8_t>& e = learnt_.return_elements[s];
    if (e.size() != count) return {};
    if (out.empty()) out.assign(count, 0);
    for (std::size_t i = 0; i < count; ++i) out[i] |= e[i] & kTensorFacts;
  }
  return out;
}

void GraphFlow::record_call_arguments(NodeId call, const std::vector<NodeId>& positional,
                                      NodeId args) {
  std::vector<std::size_t> targets = file_.callees_of(call);
  if (targets.empty()) return;
  for (std::size_t s : targets) {
    if (file_.is_hook_scope(s)) continue;  // the framework calls it with its own values
    const Scope& callee = file_.scopes_[s];
    std::vector<std::uint8_t>& into = next_.arguments[s];
    std::size_t first = callee.class_node != kNoNode ? 1 : 0;  // self
    for (std::size_t i = 0; i < positional.size(); ++i) {
      if (tree_.kind(positional[i]) == NodeKind::kListSplat) break;  // *args: positions unknown
      std::size_t p = first + i;
      if (p >= into.size()) break;
      into[p] |= file_.bits_[positional[i]] & kTensorFacts;
    }
    if (args == kNoNode || tree_.kind(args) != NodeKind::kArgumentList) continue;
    for (NodeId a : tree_.named_children(args)) {
      if (tree_.kind(a) != NodeKind::kKeywordArgument) continue;
      NodeId name = tree_.child_by_field(a, Field::kName);
      NodeId value = tree_.child_by_field(a, Field::kValue);
      if (name == kNoNode || value == kNoNode) continue;
      for (std::size_t p = 0; p < callee.parameters.size(); ++p) {
        if (callee.parameters[p] == tree_.text(name)) into[p] |= file_.bits_[value] & kTensorFacts;
      }
    }
  }
}

std::uint8_t GraphFlow::torch_function_bits(std::string_view q, NodeId call, std::uint8_t args) {
  std::string_view last = vocabulary::last_component(q);
  if (is_capitalized(last) || starts_with(q, "torch.cuda.") ||
      starts_with(q, "torch.distributed.") || starts_with(q, "torch.utils.") ||
      starts_with(q, "torch.backends.")) {
    return 0;
  }
  if (one_of(last, {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "tensor",
                    "as_tensor", "arange", "linspace", "eye", "randperm", "from_numpy"})) {
    if (!call_targets_cuda_device(file_, call)) return 0;
    // torch.tensor(0.0, device=...) is one number; anything with a shape is not.
    std::vector<NodeId> positional = file_.positional_arguments(call);
    bool one_number = (last == "tensor" || last == "as_tensor") && positional.size() == 1 &&
                      (tree_.kind(positional[0]) == NodeKind::kInteger ||
                       tree_.kind(positional[0]) == NodeKind::kFloat);
    return one_number ? kDeviceTensor : static_cast<std::uint8_t>(kDeviceTensor | kNonScalar);
  }
  if (one_of(last,
             {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"})) {
    return args & (kDeviceTensor | kNonScalar);
  }
  if (one_of(last, {"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "device",
                    "manual_seed", "save", "load", "is_tensor", "numel", "compile",
                    "set_default_dtype", "get_default_dtype", "is_grad_enabled"})) {
    return 0;
  }
  if (one_of(last, {"argmax", "argmin", "eq", "ne", "lt", "gt", "le", "ge", "isnan", "isinf",
                    "isfinite", "nonzero", "argsort", "equal", "allclose", "count_nonzero"})) {
    return args & (kDeviceTensor | kNonScalar);
  }
  // A loss function gives one number unless asked not to reduce.
  if (starts_with(q, "torch.nn.functional.") &&
      (vocabulary::is_loss_name(last) || starts_with(last, "cross_entropy") ||
       starts_with(last, "binary_cross_entropy") || last == "kl_div")) {
    NodeId reduction = file_.keyword_argument(call, "reduction");
    bool reduced =
        reduction == kNoNode || tree_.text(reduction).find("none") == std::string_view::npos;
    std::uint8_t bits = args & (reduced ? kTensorBits : kTensorFacts);
    return strip_if_no_grad(bits);
  }
  if (q == "torch.autograd.grad") {
    NodeId create = file_.keyword_argument(call, "create_graph");
    bool graph = create != kNoNode && tree_.kind(create) != NodeKind::kFalse;
    return graph ? strip_if_no_grad(kTensorBits) : static_cast<std::uint8_t>(kDeviceTensor);
  }
  std::uint8_t bits = args & kTensorFacts;
  if (one_of(last, {"sum", "mean", "norm", "prod", "std", "var"}) &&
      file_.positional_arguments(call).size() == 1 &&
      file_.keyword_argument(call, "dim") == kNoNode) {
    bits = static_cast<std::uint8_t>(bits & ~kNonScalar);
  }
  if (one_of(last, {"cat", "concat", "concatenate", "stack", "hstack", "vstack"})) {
    bits |= (bits & kTensorBits) ? kNonScalar : 0;
  }
  return strip_if_no_grad(bits);
}

std::uint8_t GraphFlow::eval_call(NodeId call, Env& env) {
  NodeId fn = file_.callee(call);
  NodeId receiver = file_.method_receiver(call);
  std::uint8_t receiver_bits = 0;
  if (receiver != kNoNode) {
    receiver_bits = eval(receiver, env);
  } else if (fn != kNoNode && tree_.kind(fn) != NodeKind::kIdentifier) {
    eval(fn, env);
  }
  // Arguments, in order.
  std::uint8_t arg_bits = 0;
  bool model_argument = false;
  std::vector<NodeId> positional;
  NodeId args = tree_.child_by_field(call, Field::kArguments);
  if (args != kNoNode) {
    if (tree_.kind(args) == NodeKind::kGeneratorExpression) {
      arg_bits |= eval(args, env);
      positional.push_back(args);
    } else {
      for (NodeId a : tree_.named_children(args)) {
        arg_bits |= eval(a, env);
        NodeKind k = tree_.kind(a);
        if (k != NodeKind::kKeywordArgument && k != NodeKind::kDictionarySplat) {
          positional.push_back(a);
          if ((k == NodeKind::kIdentifier || k == NodeKind::kAttribute) &&
              file_.is_model_expression(a, call)) {
            model_argument = true;
          }
        }
      }
    }
  }
  std::string_view name = file_.callee_last_name(call);
  std::string q = file_.qualified_name(fn);
  record_stores_through_parameters(call, positional);
  record_call_arguments(call, positional, args);

  if (receiver != kNoNode) {
    // Stores into containers: the receiver now holds the value.
    StoreKind store_kind = StoreKind::kAppend;
    NodeId stored = kNoNode;
    if (is_append_method(name) && !positional.empty()) {
      stored = positional.back();
    } else if (name == "insert" && positional.size() >= 2) {
      stored = positional[1];
    } else if ((name == "extend" || name == "extendleft") && !positional.empty()) {
      store_kind = StoreKind::kExtend;
      stored = positional.front();
    }
    if (stored != kNoNode) {
      std::uint8_t bits = file_.bits_[stored];
      record_store(store_kind, call, receiver, kNoNode, stored, bits);
      std::string holder = dotted_text(tree_, receiver);
      if (!holder.empty() && bits != 0) env.add(holder, bits);
      return 0;
    }
  }

  if (q == "sys.exc_info" || q == "sys.exception") return kException;
  if (is_weak_reference(q)) return 0;
  if (starts_with(q, "traceback.") || starts_with(q, "logging.") || starts_with(q, "np.") ||
      starts_with(q, "numpy.") || starts_with(q, "math.") || starts_with(q, "statistics.")) {
    return 0;
  }

  if (receiver != kNoNode) {
    if (receiver_bits & kException) {
      if (name == "with_traceback") {
        return (!positional.empty() && tree_.kind(positional[0]) == NodeKind::kNone)
                   ? 0
                   : receiver_bits;
      }
      return 0;
    }
    if (returns_python_value(name)) return 0;
    // Only tensors have detach(): whatever it was, the result is one.
    if (name == "detach" || name == "detach_") {
      return static_cast<std::uint8_t>(kDeviceTensor | (receiver_bits & kNonScalar));
    }
    // The copy is on the host; its graph (and the graph's activations) is not.
    if (name == "cpu") return receiver_bits & (kCarriesGraph | kNonScalar);
    if (name == "to" || name == "cuda") {
      if (file_.is_model_expression(receiver, call)) return 0;  // a module, not a tensor
      if (name == "to") {
        NodeId a = args;
        bool to_cpu = a != kNoNode && tree_.text(a).find("cpu") != std::string_view::npos;
        if (to_cpu) return receiver_bits & (kCarriesGraph | kNonScalar);
        return static_cast<std::uint8_t>(
            receiver_bits | (call_targets_cuda_device(file_, call) ? kDeviceTensor : 0));
      }
      return static_cast<std::uint8_t>(receiver_bits | kDeviceTensor);
    }
    if (returns_tensor_without_graph(name)) return receiver_bits & kDeviceTensor;
  }

  if (q == "functools.partial" || q == "partial") {
    return arg_bits & kTensorFacts;  // a closure over its arguments
  }
  if (receiver == kNoNode) {
    if (one_of(name, {"float",   "int",   "bool", "str",        "repr",       "len",  "print",
                      "format",  "type",  "id",   "isinstance", "issubclass", "hash", "callable",
                      "hasattr", "bytes", "ord",  "chr",        "vars",       "dir",  "open"})) {
      return 0;
    }
    if (one_of(name, {"sum", "max", "min", "abs", "round", "pow"})) {
      return strip_if_no_grad(arg_bits & kTensorFacts);
    }
    if (one_of(name, {"list", "tuple", "set", "dict", "sorted", "reversed", "iter", "next", "zip",
                      "enumerate", "map", "filter", "frozenset", "deepcopy"}) ||
        q == "copy.copy" || q == "copy.deepcopy") {
      return arg_bits;
    }
  }

  if (file_.is_model_call(call)) return strip_if_no_grad(kTensorBits | kNonScalar);
  if (receiver != kNoNode && (receiver_bits & kTensorBits)) {
    // A tensor method: sum(), mean(), view(), softmax() ... passes it on;
    // a full reduction leaves one element.
    std::uint8_t bits =
        static_cast<std::uint8_t>((receiver_bits | (arg_bits & kTensorBits)) & kTensorFacts);
    if (one_of(name, {"sum", "mean", "norm", "max", "min", "prod", "std", "var", "amax", "amin",
                      "logsumexp"}) &&
        positional.empty() && file_.keyword_argument(call, "dim") == kNoNode) {
      bits = static_cast<std::uint8_t>(bits & ~kNonScalar);
    }
    return strip_if_no_grad(bits);
  }
  if (receiver != kNoNode && (receiver_bits & kParameterBits) && !(receiver_bits & kValueBits)) {
    // A method of a parameter we know nothing more about (`stats.items()`,
    // `val.float()`): the result still comes from that parameter.
    return receiver_bits & kParameterBits;
  }
  if (starts_with(q, "torch.")) return torch_function_bits(q, call, arg_bits);
  if (file_.is_loss_callee(call)) {
    std::uint8_t bits = arg_bits & kTensorBits;
    if (model_argument) bits |= kTensorBits;  // compute_loss(model, batch)
    // A loss is one number unless asked not to reduce.
    NodeId reduction = file_.keyword_argument(call, "reduction");
    if (reduction != kNoNode && tree_.text(reduction).find("none") != std::string_view::npos) {
      bits |= kNonScalar;
    }
    return strip_if_no_grad(bits);
  }
  std::string dotted = dotted_text(tree_, fn);
  if (!dotted.empty() && (receiver == kNoNode || dotted.rfind("self.", 0) == 0)) {
    std::uint8_t summary = same_file_function_bits(call);
    if (summary != 0) return strip_if_no_grad(summary);
  }
  if (receiver == kNoNode && is_capitalized(name)) {
    // A module built from tensors holds its own parameters, not one value per
    // step; a weak reference keeps nothing alive.
    if (constructs_module(call) || is_weak_reference(q)) return 0;
    // A constructor keeps what it is given (a record of (step, loss, error)).
    return arg_bits;
  }
  return 0;
}

bool GraphFlow::constructs_module(NodeId call) {
  if (file_.is_torch_module_constructor(call)) return true;
  if (!module_classes_ready_) {
    module_classes_ready_ = true;
    for (const ClassFacts& c : file_.classes_) {
      if (c.is_module) module_classes_.insert(c.name);
    }
  }
  return module_classes_.count(std::string(file_.callee_last_name(call))) != 0;
}

}  // namespace gpuleak::lint
