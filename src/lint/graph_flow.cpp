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
  returns_.assign(file_.scopes_.size(), 0);
  parameter_sinks_.assign(file_.scopes_.size(), 0);
  // Round one learns what each function returns; round two uses it.
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < file_.scopes_.size(); ++i) analyze_scope(i);
  }
}

std::uint8_t GraphFlow::strip_if_no_grad(std::uint8_t bits) const {
  return grad_enabled_ ? bits : static_cast<std::uint8_t>(bits & ~kCarriesGraph);
}

void GraphFlow::set(Env& env, const std::string& key, std::uint8_t bits) {
  if (key.empty()) return;
  if (bits == 0) {
    env.erase(key);
  } else {
    env[key] = bits;
  }
}

void GraphFlow::merge_into(Env& into, const Env& from) {
  for (const auto& [key, bits] : from) into[key] |= bits;
}

void GraphFlow::analyze_scope(std::size_t index) {
  const Scope& scope = file_.scopes_[index];
  scope_ = index;
  grad_enabled_ = !scope.grad_disabled;
  loop_depth_ = 0;
  returned_ = 0;
  Env env;
  // Mark the first parameters (after self) so stores can tell where a
  // value came from.
  {
    std::size_t first = scope.class_node != kNoNode ? 1 : 0;
    for (std::size_t p = first, bit = 0; p < scope.parameters.size() && bit < kTrackedParameters;
         ++p, ++bit) {
      set(env, scope.parameters[p], static_cast<std::uint8_t>(kFirstParameterBit << bit));
    }
  }
  if (file_.is_hook_scope(index)) {
    // hook(module, input, output) / hook(grad): the tensors it is handed.
    std::size_t first = scope.class_node != kNoNode ? 1 : 0;  // skip self
    std::size_t count = scope.parameters.size();
    if (count > first + 1) ++first;  // skip the module argument
    for (std::size_t p = first; p < count; ++p) env[scope.parameters[p]] |= kDeviceTensor;
  }
  if (scope.node == tree_.root()) {
    walk_block(tree_.root(), env);
  } else if (tree_.kind(scope.node) == NodeKind::kLambda) {
    returned_ |= eval(scope.body, env);
  } else if (scope.body != kNoNode) {
    walk_block(scope.body, env);
  }
  returns_[index] = returned_;
}

void GraphFlow::walk_block(NodeId block, Env& env) {
  for (NodeId s = tree_.node(block).first_child; s != kNoNode; s = tree_.node(s).next_sibling) {
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
      Env entry = env;
      bind_pattern(left, iterated, env);
      if (body != kNoNode) walk_loop_body(body, env);
      merge_into(env, entry);
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
      NodeId name = tree_.child_by_field(statement, Field::kName);
      if (name != kNoNode) env.erase(std::string(tree_.text(name)));
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
      Env start = env;
      Env result = start;
      for (NodeId id = statement + 1; id < tree_.node(statement).subtree_end; ++id) {
        if (tree_.kind(id) != NodeKind::kBlock) continue;
        NodeId owner = tree_.parent(id);
        if (owner == kNoNode || tree_.parent(owner) == kNoNode ||
            tree_.parent(tree_.parent(owner)) != statement) {
          continue;  // only the case bodies directly in this match
        }
        Env branch = start;
        walk_block(id, branch);
        merge_into(result, branch);
      }
      env = std::move(result);
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

void GraphFlow::walk_if(NodeId statement, Env& env) {
  eval(tree_.child_by_field(statement, Field::kCondition), env);
  Env start = env;
  NodeId consequence = tree_.child_by_field(statement, Field::kConsequence);
  if (consequence != kNoNode) walk_block(consequence, env);
  Env result = std::move(env);
  bool has_else = false;
  for (NodeId c = tree_.node(statement).first_child; c != kNoNode; c = tree_.node(c).next_sibling) {
    if (tree_.node(c).field != Field::kAlternative) continue;
    Env branch = start;
    if (tree_.kind(c) == NodeKind::kElifClause) {
      eval(tree_.child_by_field(c, Field::kCondition), branch);
      NodeId body = tree_.child_by_field(c, Field::kConsequence);
      if (body != kNoNode) walk_block(body, branch);
    } else {
      has_else = true;
      NodeId body = tree_.child_by_field(c, Field::kBody);
      if (body != kNoNode) walk_block(body, branch);
    }
    merge_into(result, branch);
  }
  if (!has_else) merge_into(result, start);
  env = std::move(result);
}

void GraphFlow::walk_try(NodeId statement, Env& env) {
  Env start = env;
  NodeId body = tree_.child_by_field(statement, Field::kBody);
  if (body != kNoNode) walk_block(body, env);
  Env after_body = env;
  Env result = after_body;
  NodeId finally_block = kNoNode;
  for (NodeId c = tree_.node(statement).first_child; c != kNoNode; c = tree_.node(c).next_sibling) {
    NodeKind k = tree_.kind(c);
    if (k == NodeKind::kExceptClause || k == NodeKind::kExceptGroupClause) {
      // The handler may start from any point of the body.
      Env handler = start;
      merge_into(handler, after_body);
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
      merge_into(result, handler);
    } else if (k == NodeKind::kElseClause) {
      Env branch = after_body;
      NodeId b = tree_.child_by_field(c, Field::kBody);
      if (b == kNoNode) b = tree_.first_named_child(c);
      if (b != kNoNode) walk_block(b, branch);
      merge_into(result, branch);
    } else if (k == NodeKind::kFinallyClause) {
      finally_block = c;
    }
  }
  env = std::move(result);
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
  Env entry = env;
  ++loop_depth_;
  walk_block(body, env);
  if (loop_depth_ <= kMaxLoopDepthWalkedTwice) {
    Env merged = entry;
    merge_into(merged, env);
    if (merged != entry) {
      // Something new reaches the next iteration: walk again with it.
      env = std::move(merged);
      walk_block(body, env);
    }
  }
  --loop_depth_;
  merge_into(env, entry);
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

void GraphFlow::assign_target(NodeId target, NodeId value, std::uint8_t bits, Env& env,
                              NodeId site) {
  if (target == kNoNode) return;
  switch (tree_.kind(target)) {
    case NodeKind::kIdentifier: {
      std::string name(tree_.text(target));
      const Scope& scope = file_.scopes_[scope_];
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
      set(env, dotted_text(tree_, target), bits);
      file_.bits_[target] = bits;
      return;
    }
    case NodeKind::kSubscript: {
      NodeId container = tree_.child_by_field(target, Field::kValue);
      NodeId key = tree_.child_by_field(target, Field::kSubscriptIndex);
      eval(container, env);
      if (key != kNoNode) eval(key, env);
      record_store(StoreKind::kSubscript, site, container, key, value, bits);
      std::string holder = dotted_text(tree_, container);
      if (!holder.empty()) env[holder] |= bits;
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
      for (std::size_t i = 0; i < elements.size(); ++i) {
        if (pairwise) {
          assign_target(elements[i], values[i], file_.bits_[values[i]], env, site);
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
                             NodeId value, std::uint8_t bits) {
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

std::vector<std::size_t> GraphFlow::callees_of(NodeId call) const {
  std::vector<std::size_t> out;
  NodeId fn = file_.callee(call);
  if (fn == kNoNode) return out;
  bool method = tree_.kind(fn) == NodeKind::kAttribute;
  std::string_view name = file_.callee_last_name(call);
  if (name.empty()) return out;
  for (std::size_t s : file_.scopes_named(name)) {
    bool is_method = file_.scopes_[s].class_node != kNoNode;
    if (is_method == method) out.push_back(s);
  }
  if (out.empty() && !method) {
    // log = make_logger(); log(x): the def the factory returns.
    auto it = factory_calls_by_name_.find(std::string(name));
    if (it != factory_calls_by_name_.end()) {
      for (NodeId right : it->second) {
        for (std::size_t s : file_.functions_passed_as(right)) out.push_back(s);
      }
    }
  }
  return out;
}

void GraphFlow::record_stores_through_parameters(NodeId call,
                                                 const std::vector<NodeId>& positional) {
  if (!any_parameter_sinks_ || positional.empty()) return;
  if (!factory_calls_indexed_) {
    factory_calls_indexed_ = true;
    for (NodeId id = 0; id < tree_.size(); ++id) {
      if (tree_.kind(id) != NodeKind::kAssignment) continue;
      NodeId left = tree_.child_by_field(id, Field::kLeft);
      NodeId right = tree_.child_by_field(id, Field::kRight);
      if (left != kNoNode && right != kNoNode && tree_.kind(left) == NodeKind::kIdentifier &&
          tree_.kind(right) == NodeKind::kCall) {
        factory_calls_by_name_[std::string(tree_.text(left))].push_back(right);
      }
    }
  }
  std::uint8_t sinks = 0;
  for (std::size_t s : callees_of(call)) sinks |= parameter_sinks_[s];
  if (sinks == 0) return;
  for (std::size_t i = 0; i < positional.size() && i < kTrackedParameters; ++i) {
    if (!(sinks & (1u << i))) continue;
    std::uint8_t bits = file_.bits_[positional[i]] & kValueBits;
    if (!(bits & kTensorBits)) continue;
    NodeId receiver = file_.method_receiver(call);
    record_store(StoreKind::kAppend, call, receiver != kNoNode ? receiver : file_.callee(call),
                 kNoNode, positional[i], bits);
  }
}

std::uint8_t GraphFlow::eval(NodeId e, Env& env) {
  if (e == kNoNode) return 0;
  std::uint8_t r = 0;
  switch (tree_.kind(e)) {
    case NodeKind::kIdentifier: {
      auto it = env.find(std::string(tree_.text(e)));
      r = it == env.end() ? 0 : it->second;
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
      for (NodeId c = tree_.node(e).first_child; c != kNoNode; c = tree_.node(c).next_sibling) {
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
        r = strip_if_no_grad(static_cast<std::uint8_t>((left | right) & kTensorBits));
      }
      break;
    }
    case NodeKind::kUnaryOperator:
      r = strip_if_no_grad(eval(tree_.first_named_child(e), env) & kTensorBits);
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
      for (std::size_t i = 0; i < parts.size(); ++i) {
        std::uint8_t b = eval(parts[i], env);
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
  Env inner = env;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    NodeId part = parts[i];
    if (tree_.kind(part) == NodeKind::kForInClause) {
      std::uint8_t iterated = eval(tree_.child_by_field(part, Field::kRight), inner);
      bind_pattern(tree_.child_by_field(part, Field::kLeft), iterated, inner);
    } else {
      eval(part, inner);
    }
  }
  NodeId body = parts[0];
  if (tree_.kind(body) == NodeKind::kPair) {
    eval(tree_.child_by_field(body, Field::kKey), inner);
    std::uint8_t v = eval(tree_.child_by_field(body, Field::kValue), inner);
    file_.bits_[body] = v;
    return v;
  }
  return eval(body, inner);
}

std::uint8_t GraphFlow::eval_attribute(NodeId e, Env& env) {
  std::uint8_t object = eval(tree_.child_by_field(e, Field::kObject), env);
  std::string key = dotted_text(tree_, e);
  if (!key.empty()) {
    auto it = env.find(key);
    if (it != env.end()) return it->second;
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

std::uint8_t GraphFlow::same_file_function_bits(std::string_view name) const {
  std::uint8_t bits = 0;
  for (std::size_t s : file_.scopes_named(name)) bits |= returns_[s];
  // A function that returns what it caught hands it to its caller on
  // purpose; only tensors and graphs flow through summaries.
  return bits & kTensorBits;
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
    return call_targets_cuda_device(file_, call) ? kDeviceTensor : 0;
  }
  if (one_of(last,
             {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"})) {
    return args & kDeviceTensor;
  }
  if (one_of(last, {"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "device",
                    "manual_seed", "save", "load", "is_tensor", "numel", "compile",
                    "set_default_dtype", "get_default_dtype", "is_grad_enabled"})) {
    return 0;
  }
  if (one_of(last, {"argmax", "argmin", "eq", "ne", "lt", "gt", "le", "ge", "isnan", "isinf",
                    "isfinite", "nonzero", "argsort", "equal", "allclose", "count_nonzero"})) {
    return args & kDeviceTensor;
  }
  if (q == "torch.autograd.grad") {
    NodeId create = file_.keyword_argument(call, "create_graph");
    bool graph = create != kNoNode && tree_.kind(create) != NodeKind::kFalse;
    return graph ? strip_if_no_grad(kTensorBits) : static_cast<std::uint8_t>(kDeviceTensor);
  }
  return strip_if_no_grad(args & kTensorBits);
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
      if (!holder.empty() && bits != 0) env[holder] |= bits;
      return 0;
    }
  }

  if (q == "sys.exc_info" || q == "sys.exception") return kException;
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
    if (name == "detach" || name == "detach_") return kDeviceTensor;
    if (name == "cpu") return receiver_bits & kCarriesGraph;  // the copy is on the host
    if (name == "to" || name == "cuda") {
      if (file_.is_model_expression(receiver, call)) return 0;  // a module, not a tensor
      if (name == "to") {
        NodeId a = args;
        bool to_cpu = a != kNoNode && tree_.text(a).find("cpu") != std::string_view::npos;
        if (to_cpu) return receiver_bits & kCarriesGraph;
        return static_cast<std::uint8_t>(
            receiver_bits | (call_targets_cuda_device(file_, call) ? kDeviceTensor : 0));
      }
      return static_cast<std::uint8_t>(receiver_bits | kDeviceTensor);
    }
    if (returns_tensor_without_graph(name)) return receiver_bits & kDeviceTensor;
  }

  if (receiver == kNoNode) {
    if (one_of(name, {"float",   "int",   "bool", "str",        "repr",       "len",  "print",
                      "format",  "type",  "id",   "isinstance", "issubclass", "hash", "callable",
                      "hasattr", "bytes", "ord",  "chr",        "vars",       "dir",  "open"})) {
      return 0;
    }
    if (one_of(name, {"sum", "max", "min", "abs", "round", "pow"})) {
      return strip_if_no_grad(arg_bits & kTensorBits);
    }
    if (one_of(name, {"list", "tuple", "set", "dict", "sorted", "reversed", "iter", "next", "zip",
                      "enumerate", "map", "filter", "frozenset", "deepcopy"}) ||
        q == "copy.copy" || q == "copy.deepcopy") {
      return arg_bits;
    }
  }

  if (file_.is_model_call(call)) return strip_if_no_grad(kTensorBits);
  if (receiver != kNoNode && (receiver_bits & kTensorBits)) {
    // A tensor method: sum(), mean(), view(), softmax() ... passes it on.
    return strip_if_no_grad(static_cast<std::uint8_t>((receiver_bits | arg_bits) & kTensorBits));
  }
  if (starts_with(q, "torch.")) return torch_function_bits(q, call, arg_bits);
  if (file_.is_loss_callee(call)) {
    std::uint8_t bits = arg_bits & kTensorBits;
    if (model_argument) bits |= kTensorBits;  // compute_loss(model, batch)
    return strip_if_no_grad(bits);
  }
  std::string dotted = dotted_text(tree_, fn);
  if (!dotted.empty() && (receiver == kNoNode || dotted.rfind("self.", 0) == 0)) {
    std::uint8_t summary = same_file_function_bits(name);
    if (summary != 0) return strip_if_no_grad(summary);
  }
  if (receiver == kNoNode && is_capitalized(name)) {
    // A constructor keeps what it is given (a record of (step, loss, error)).
    return arg_bits;
  }
  return 0;
}

}  // namespace gpuleak::lint
