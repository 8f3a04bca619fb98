#include "store_growth.h"

#include <algorithm>

#include "training_loop.h"
#include "vocabulary.h"

namespace gpuleak::lint {
namespace {

std::string root_of(const std::string& path) { return path.substr(0, path.find('.')); }

bool mentions(const FileAnalysis& file, NodeId expression, const std::string& path) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = expression; id < tree.node(expression).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if ((k == NodeKind::kIdentifier || k == NodeKind::kAttribute) &&
        dotted_text(tree, id) == path) {
      return true;
    }
  }
  return false;
}

// Whether `reset` is a statement of a block that holds `store` further on:
// whenever the store runs, the reset ran before it in the same iteration
// (`if chunked: pred = None` and then, in that branch, the loop that grows
// `pred`), however conditional that block is.
bool precedes_in_a_block_around(const SyntaxTree& tree, NodeId reset, NodeId store) {
  if (reset >= store) return false;
  NodeId statement = reset;
  while (tree.parent(statement) != kNoNode &&
         tree.kind(tree.parent(statement)) != NodeKind::kBlock) {
    statement = tree.parent(statement);
  }
  NodeId block = tree.parent(statement);
  return block != kNoNode && tree.contains(block, store);
}

// Whether `id` reaches the loop body through if/elif/else branches only: a
// flush that runs every N steps (`if step % N == 0: ...; buf = []`), not one
// in an exception handler or an inner loop.
bool runs_under_ifs_only(const SyntaxTree& tree, NodeId id, NodeId body) {
  for (NodeId p = tree.parent(id); p != kNoNode && p != body; p = tree.parent(p)) {
    switch (tree.kind(p)) {
      case NodeKind::kExceptClause:
      case NodeKind::kExceptGroupClause:
      case NodeKind::kForStatement:
      case NodeKind::kWhileStatement:
      case NodeKind::kConditionalExpression:
      case NodeKind::kBooleanOperator:
        return false;
      default:
        break;
    }
  }
  return true;
}

// `[]`, `{}`, `()`, `0`, `0.0`, `None`, `list()`, `defaultdict(list)`: a
// container or sum started afresh.
bool is_empty_value(const FileAnalysis& file, NodeId value) {
  const SyntaxTree& tree = file.tree();
  switch (tree.kind(value)) {
    case NodeKind::kList:
    case NodeKind::kDictionary:
    case NodeKind::kTuple:
    case NodeKind::kSet:
      return tree.named_children(value).empty();
    case NodeKind::kNone:
      return true;
    case NodeKind::kInteger:
    case NodeKind::kFloat:
      return tree.text(value) == "0" || tree.text(value) == "0.0" || tree.text(value) == "0.";
    case NodeKind::kCall: {
      std::string qualified = file.qualified_name(file.callee(value));
      std::string_view last = vocabulary::last_component(qualified);
      if (last == "defaultdict") return file.positional_arguments(value).size() <= 1;
      return (last == "list" || last == "dict" || last == "set" || last == "deque" ||
              last == "OrderedDict") &&
             file.positional_arguments(value).empty();
    }
    default:
      return false;
  }
}

// `path = ...` afresh, or one element of a tuple assignment that empties
// several at once (`preds, targets, stats = [], [], {}`). With `only_empty`,
// only a rebinding to an empty value counts: under an `if`, that is a
// periodic flush, while `else: ema = losses[1]` starts a value, not a bound.
bool assignment_rebinds(const FileAnalysis& file, NodeId assignment, const std::string& path,
                        bool only_empty) {
  const SyntaxTree& tree = file.tree();
  NodeId left = tree.child_by_field(assignment, Field::kLeft);
  NodeId right = tree.child_by_field(assignment, Field::kRight);
  if (left == kNoNode || right == kNoNode) return false;
  if (dotted_text(tree, left) == path) {
    return !mentions(file, right, path) && (!only_empty || is_empty_value(file, right));
  }
  NodeKind lk = tree.kind(left);
  NodeKind rk = tree.kind(right);
  bool tuple_left = lk == NodeKind::kPatternList || lk == NodeKind::kTuplePattern ||
                    lk == NodeKind::kTuple || lk == NodeKind::kExpressionList ||
                    lk == NodeKind::kListPattern;
  bool tuple_right = rk == NodeKind::kTuple || rk == NodeKind::kExpressionList ||
                     rk == NodeKind::kList || rk == NodeKind::kPatternList;
  if (!tuple_left || !tuple_right) return false;
  std::vector<NodeId> targets = tree.named_children(left);
  std::vector<NodeId> values = tree.named_children(right);
  if (targets.size() != values.size()) return false;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (dotted_text(tree, targets[i]) == path) {
      return !mentions(file, values[i], path) && (!only_empty || is_empty_value(file, values[i]));
    }
  }
  return false;
}

// `path = path[-N:]`, `del path[0]`, `path.pop(0)`: the loop trims the
// container to a size bound (usually under `if len(path) > N`).
bool trims_itself(const FileAnalysis& file, NodeId id, const std::string& path) {
  const SyntaxTree& tree = file.tree();
  NodeKind k = tree.kind(id);
  if (k == NodeKind::kAssignment) {
    NodeId left = tree.child_by_field(id, Field::kLeft);
    NodeId right = tree.child_by_field(id, Field::kRight);
    return left != kNoNode && right != kNoNode && dotted_text(tree, left) == path &&
           tree.kind(right) == NodeKind::kSubscript &&
           dotted_text(tree, tree.child_by_field(right, Field::kValue)) == path;
  }
  if (k == NodeKind::kCall) {
    NodeId receiver = file.method_receiver(id);
    std::string_view m = file.callee_last_name(id);
    return receiver != kNoNode && (m == "pop" || m == "popleft") &&
           dotted_text(tree, receiver) == path;
  }
  if (k == NodeKind::kDeleteStatement) {
    for (NodeId t = id; t < tree.node(id).subtree_end; ++t) {
      if (tree.kind(t) == NodeKind::kSubscript &&
          dotted_text(tree, tree.child_by_field(t, Field::kValue)) == path) {
        return true;
      }
    }
  }
  return false;
}

// An `path = ...` (not a self-update), `path.clear()` or `del path` inside the
// loop body that runs on every iteration, or on every iteration that reaches
// the store. With `periodic`, also every few iterations under an `if` (a
// flush after N steps) or a trim to a size bound: that bounds tensors, but
// not graphs, of which N steps' worth is already the leak.
bool reset_in_loop(const FileAnalysis& file, const std::string& path, NodeId loop,
                   std::size_t scope, NodeId store, bool periodic) {
  const SyntaxTree& tree = file.tree();
  NodeId body = file.loop_body(loop);
  if (body == kNoNode) return false;
  for (NodeId id = body; id < tree.node(body).subtree_end; ++id) {
    if (file.scope_index_of(id) != scope) continue;
    NodeKind k = tree.kind(id);
    bool resets = false;
    bool empties = false;  // to an empty value: a flush, even when conditional
    if (k == NodeKind::kAssignment) {
      resets = assignment_rebinds(file, id, path, false);
      empties = resets && assignment_rebinds(file, id, path, true);
    } else if (k == NodeKind::kCall) {
      NodeId receiver = file.method_receiver(id);
      resets = receiver != kNoNode && file.callee_last_name(id) == "clear" &&
               dotted_text(tree, receiver) == path;
      empties = resets;
    } else if (k == NodeKind::kDeleteStatement) {
      std::string_view text = tree.text(id);
      resets = text.find(path) != std::string_view::npos;
    }
    if (resets &&
        (!file.runs_conditionally_in(id, loop) || precedes_in_a_block_around(tree, id, store) ||
         (periodic && empties && runs_under_ifs_only(tree, id, body)))) {
      return true;
    }
    if (periodic && trims_itself(file, id, path) && runs_under_ifs_only(tree, id, body)) {
      return true;
    }
  }
  return false;
}

// `def reset(self): self.sum = 0` called from `__init__` and nowhere else
// only initialises; a method never called in the file may be called by
// the user (meter.reset() every epoch), so it counts as a reset.
bool called_only_from_init(const FileAnalysis& file, const std::string& method) {
  bool called = false;
  for (NodeId call : file.calls_named(method)) {
    if (file.method_receiver(call) == kNoNode) continue;
    called = true;
    if (file.scope_of(call).name != "__init__") return false;
  }
  return called;
}

// Created by a tensor factory (torch.zeros, torch.empty, torch.full ...) or
// moved/cloned from one: assignments into it write in place.
bool container_is_tensor(const FileAnalysis& file, const std::string& path) {
  const SyntaxTree& tree = file.tree();
  // `p.grad` is a tensor, and so is `t.data` of one: `grads.data[mask, :] =
  // ...fill_(0)` (diffusers' textual inversion) writes in place.
  std::string_view tail = vocabulary::last_component(path);
  if (tail == "grad" && path != "grad") return true;
  if (tail == "data" && path.size() > 5 &&
      container_is_tensor(file, path.substr(0, path.size() - 5))) {
    return true;
  }
  for (NodeId id : file.assignments_to(path)) {
    NodeId right = tree.child_by_field(id, Field::kRight);
    NodeId attribute = right != kNoNode && tree.kind(right) == NodeKind::kAttribute
                           ? tree.child_by_field(right, Field::kAttributeName)
                           : kNoNode;
    if (attribute != kNoNode && tree.text(attribute) == "grad") {
      return true;  // `grads = embeddings.weight.grad`
    }
    // `-torch.ones(...)`, `(torch.zeros(...))`, `torch.ones(...) * -1`: still a tensor.
    for (int hops = 0; hops < 4 && right != kNoNode; ++hops) {
      NodeKind k = tree.kind(right);
      if (k == NodeKind::kUnaryOperator || k == NodeKind::kParenthesizedExpression) {
        right = tree.first_named_child(right);
      } else if (k == NodeKind::kBinaryOperator) {
        right = tree.child_by_field(right, Field::kLeft);
      } else {
        break;
      }
    }
    for (int hops = 0; hops < 4 && right != kNoNode && tree.kind(right) == NodeKind::kCall;
         ++hops) {
      std::string q = file.qualified_name(file.callee(right));
      std::string_view last = vocabulary::last_component(q);
      if (q.rfind("torch.", 0) == 0 &&
          (last == "zeros" || last == "ones" || last == "empty" || last == "full" ||
           last == "rand" || last == "randn" || last == "tensor" || last == "arange" ||
           last == "zeros_like" || last == "empty_like" || last == "full_like" ||
           last == "ones_like")) {
        return true;
      }
      std::string_view m = file.callee_last_name(right);
      if (m != "to" && m != "cuda" && m != "clone" && m != "contiguous" && m != "pin_memory" &&
          m != "long" && m != "float" && m != "int" && m != "half" && m != "bfloat16" &&
          m != "double" && m != "bool" && m != "type" && m != "share_memory_") {
        break;
      }
      NodeId receiver = file.method_receiver(right);
      if (receiver == kNoNode) break;
      right = receiver;
    }
  }
  return false;
}

// `c[k] = c[k].to(...)` (or `.cpu()`, `.contiguous()` ...): the value is the
// very slot it replaces, moved or cast.
bool replaces_slot_with_itself(const FileAnalysis& file, const StoreEvent& store) {
  const SyntaxTree& tree = file.tree();
  if (store.value == kNoNode || store.key == kNoNode || store.container == kNoNode) return false;
  NodeId v = store.value;
  for (int hops = 0; hops < 4 && v != kNoNode && tree.kind(v) == NodeKind::kCall; ++hops) {
    std::string_view m = file.callee_last_name(v);
    if (m != "to" && m != "cuda" && m != "cpu" && m != "contiguous" && m != "pin_memory" &&
        m != "detach" && m != "clone" && m != "half" && m != "float" && m != "bfloat16") {
      return false;
    }
    v = file.method_receiver(v);
  }
  if (v == kNoNode || tree.kind(v) != NodeKind::kSubscript) return false;
  NodeId key = tree.child_by_field(v, Field::kSubscriptIndex);
  NodeId container = tree.child_by_field(v, Field::kValue);
  return key != kNoNode && container != kNoNode && tree.text(key) == tree.text(store.key) &&
         tree.text(container) == tree.text(store.container);
}

// `x[a:b] = v`, `x[..., 0] = v`, `boxes[idx, 2] = v`: an index with a slice,
// an ellipsis or `None`, or several indices one of which is a number, is
// array indexing. It writes into slots that exist (a tensor, an array, a list
// slice); no dictionary is keyed like that.
bool key_indexes_an_array(const FileAnalysis& file, NodeId key) {
  const SyntaxTree& tree = file.tree();
  if (key == kNoNode) return false;
  NodeId subscript = tree.parent(key);
  if (subscript == kNoNode || tree.kind(subscript) != NodeKind::kSubscript) return false;
  int indices = 0;
  bool number = false;
  for (NodeId c : tree.named_children(subscript)) {
    if (tree.node(c).field != Field::kSubscriptIndex) continue;
    ++indices;
    NodeKind k = tree.kind(c);
    if (k == NodeKind::kSlice || k == NodeKind::kNone || tree.text(c) == "...") return true;
    if (k == NodeKind::kInteger || (k == NodeKind::kUnaryOperator &&
                                    tree.kind(tree.first_named_child(c)) == NodeKind::kInteger)) {
      number = true;
    }
  }
  return indices > 1 && number;
}

// The names a list's length is made of: `max_iterations` in `[None] *
// max_iterations`, `self._num_gpus` in `[[None] * 4 for i in
// range(self._num_gpus)]`; not the called functions, nor the comprehension's
// own variables.
void length_names(const SyntaxTree& tree, NodeId root, std::vector<std::string>& out) {
  std::vector<std::string> bound;
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kForInClause) {
      NodeId left = tree.child_by_field(id, Field::kLeft);
      if (left != kNoNode) bound.emplace_back(tree.text(left));
    }
  }
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
    NodeId parent = tree.parent(id);
    if (parent != kNoNode && tree.kind(parent) == NodeKind::kAttribute) continue;
    if (tree.node(id).field == Field::kFunction || tree.node(id).field == Field::kLeft) continue;
    std::string d = dotted_text(tree, id);
    if (d.empty() || std::find(bound.begin(), bound.end(), d) != bound.end()) continue;
    out.push_back(std::move(d));
  }
}

// Every binding of the container makes a list of a fixed length (`[None] *
// n`, `[[None] * 4 for _ in gpus]`, `[a, b]`): an index assignment replaces a
// slot (a list raises rather than grow), so the list keeps at most its length.
// Not when that length is what a loop around `site` counts to (`losses =
// [None] * max_iterations` filled by `while i < max_iterations`): one slot
// per iteration (of a step loop or a `while`) is an append in all but name.
bool container_is_fixed_list(const FileAnalysis& file, const std::string& path, NodeId site) {
  const SyntaxTree& tree = file.tree();
  const auto& bindings = file.assignments_to(path);
  if (bindings.empty()) return false;
  std::vector<std::string> lengths;
  for (NodeId id : bindings) {
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (right == kNoNode) return false;
    NodeKind k = tree.kind(right);
    if (k == NodeKind::kBinaryOperator) {
      NodeId left = tree.child_by_field(right, Field::kLeft);
      if (left == kNoNode || tree.kind(left) != NodeKind::kList) return false;
    } else if (k != NodeKind::kListComprehension &&
               !(k == NodeKind::kList && tree.first_named_child(right) != kNoNode)) {
      return false;
    }
    length_names(tree, right, lengths);
  }
  for (NodeId loop = file.innermost_loop(site); loop != kNoNode; loop = file.outer_loop(loop)) {
    // A loop over devices or layers fills its slots once; steps and open
    // `while` loops fill one per iteration.
    if (tree.kind(loop) != NodeKind::kWhileStatement && !is_step_loop(file, loop)) continue;
    NodeId body = file.loop_body(loop);
    for (NodeId id = loop; id < (body != kNoNode ? body : tree.node(loop).subtree_end); ++id) {
      NodeKind k = tree.kind(id);
      if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
      std::string d = dotted_text(tree, id);
      if (std::find(lengths.begin(), lengths.end(), d) != lengths.end()) return false;
    }
  }
  return true;
}

bool is_parameter(const Scope& scope, const std::string& name) {
  for (const auto& p : scope.parameters) {
    if (p == name) return true;
  }
  return false;
}

}  // namespace

std::string container_path(const FileAnalysis& file, NodeId container) {
  const SyntaxTree& tree = file.tree();
  NodeId n = container;
  for (int guard = 0; n != kNoNode && guard < 64; ++guard) {
    std::string dotted = dotted_text(tree, n);
    if (!dotted.empty()) return dotted;
    switch (tree.kind(n)) {
      case NodeKind::kSubscript:
        n = tree.child_by_field(n, Field::kValue);
        break;
      case NodeKind::kCall: {
        NodeId receiver = file.method_receiver(n);
        n = receiver != kNoNode ? receiver : kNoNode;
        break;
      }
      case NodeKind::kAttribute:
        n = tree.child_by_field(n, Field::kObject);
        break;
      case NodeKind::kParenthesizedExpression:
        n = tree.first_named_child(n);
        break;
      default:
        return {};
    }
  }
  return {};
}

namespace {

// The right side of the last plain assignment to `name` before `at`, in
// the same function; kNoNode when there is none.
NodeId value_assigned_before(const FileAnalysis& file, std::string_view name, NodeId at) {
  const SyntaxTree& tree = file.tree();
  std::size_t scope = file.scope_index_of(at);
  // Assignments are in source order: search back from `at` (a common name
  // such as `x` has thousands of them in a large file).
  const std::vector<NodeId>& all = file.assignments_to(std::string(name));
  auto end = std::lower_bound(all.begin(), all.end(), at);
  for (auto it = end; it != all.begin();) {
    --it;
    if (file.scope_index_of(*it) == scope) return tree.child_by_field(*it, Field::kRight);
  }
  return kNoNode;
}

enum class KeyChange { kNone, kPerStep, kPerSize };

KeyChange key_change(const FileAnalysis& file, NodeId key, int hops) {
  if (key == kNoNode) return KeyChange::kNone;
  const SyntaxTree& tree = file.tree();
  KeyChange change = KeyChange::kNone;
  for (NodeId id = key; id < tree.node(key).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k == NodeKind::kIdentifier) {
      std::string_view name = tree.text(id);
      if (vocabulary::is_step_counter_name(name)) return KeyChange::kPerStep;
      if (vocabulary::is_size_name(name)) change = KeyChange::kPerSize;
      // `key = (num_requests, max_tokens)` just before `cache[key] = ...`;
      // not a lookup (`param = self._index_to_param[index]`), whose result
      // is one of a fixed set.
      if (hops > 0 && id == key) {
        NodeId value = value_assigned_before(file, name, key);
        NodeKind vk = value != kNoNode ? tree.kind(value) : NodeKind::kOther;
        if (vk == NodeKind::kTuple || vk == NodeKind::kExpressionList ||
            vk == NodeKind::kParenthesizedExpression || vk == NodeKind::kBinaryOperator ||
            vk == NodeKind::kString || vk == NodeKind::kIdentifier || vk == NodeKind::kCall) {
          KeyChange inner = key_change(file, value, hops - 1);
          if (inner != KeyChange::kNone) return inner;
        }
      }
    } else if (k == NodeKind::kAttribute) {
      NodeId attr = tree.child_by_field(id, Field::kAttributeName);
      if (attr != kNoNode && tree.text(attr) == "shape") change = KeyChange::kPerSize;
    } else if (k == NodeKind::kCall) {
      std::string q = file.qualified_name(file.callee(id));
      if (q == "next" || q.rfind("time.", 0) == 0 || q.rfind("uuid.", 0) == 0 ||
          q.rfind("datetime.", 0) == 0) {
        return KeyChange::kPerStep;
      }
      if (q == "len") return KeyChange::kPerStep;
      std::string_view m = file.callee_last_name(id);
      if (m == "size" || m == "numel" || m == "dim") change = KeyChange::kPerSize;
    }
  }
  return change;
}

}  // namespace

bool key_varies_per_step(const FileAnalysis& file, NodeId key) {
  return key_change(file, key, 1) == KeyChange::kPerStep;
}

bool key_varies_with_sizes(const FileAnalysis& file, NodeId key) {
  return key_change(file, key, 1) == KeyChange::kPerSize;
}

namespace {

// Under an `if` whose condition tests the container itself (`is None`,
// `not in`): the branch fills a missing slot, it does not empty one.
bool initialises_on_first_use(const FileAnalysis& file, NodeId assignment,
                              const std::string& path) {
  const SyntaxTree& tree = file.tree();
  for (NodeId p = tree.parent(assignment); p != kNoNode; p = tree.parent(p)) {
    NodeKind k = tree.kind(p);
    if (k == NodeKind::kFunctionDefinition || k == NodeKind::kLambda) break;
    if (k != NodeKind::kIfStatement && k != NodeKind::kElifClause) continue;
    NodeId condition = tree.child_by_field(p, Field::kCondition);
    if (condition != kNoNode && mentions(file, condition, path)) return true;
  }
  return false;
}

// Directly under `if path is None:` (or `if not path:`), in its first
// branch: the rebinding runs only while there is nothing to drop, the first
// fill of `if c is None: c = v else: c = torch.cat([c, v])`. Stricter than
// initialises_on_first_use: `if len(c) > n: c = []` mentions c and does empty it.
bool binds_only_when_unset(const FileAnalysis& file, NodeId assignment, const std::string& path) {
  const SyntaxTree& tree = file.tree();
  NodeId statement = tree.parent(assignment);
  if (statement == kNoNode || tree.kind(statement) != NodeKind::kExpressionStatement) return false;
  NodeId block = tree.parent(statement);
  NodeId branch = block != kNoNode ? tree.parent(block) : kNoNode;
  if (branch == kNoNode || tree.kind(branch) != NodeKind::kIfStatement ||
      tree.child_by_field(branch, Field::kConsequence) != block) {
    return false;
  }
  NodeId condition = tree.child_by_field(branch, Field::kCondition);
  while (condition != kNoNode && tree.kind(condition) == NodeKind::kParenthesizedExpression) {
    condition = tree.first_named_child(condition);
  }
  if (condition == kNoNode) return false;
  if (tree.kind(condition) == NodeKind::kNotOperator) {
    return dotted_text(tree, tree.first_named_child(condition)) == path;
  }
  if (tree.kind(condition) != NodeKind::kComparisonOperator) return false;
  std::vector<NodeId> parts = tree.named_children(condition);
  std::string_view text = tree.text(condition);
  return parts.size() == 2 && tree.kind(parts[1]) == NodeKind::kNone &&
         dotted_text(tree, parts[0]) == path && text.find(" is not ") == std::string_view::npos &&
         text.find(" is ") != std::string_view::npos;
}

}  // namespace

namespace {

// True when `site` runs in a loop that holds a step loop of its own beside
// it: the epoch loop, whose body runs the steps and then `site` once.
bool runs_beside_a_step_loop(const FileAnalysis& file, NodeId site) {
  const SyntaxTree& tree = file.tree();
  NodeId loop = file.innermost_loop(site);
  if (loop == kNoNode) return false;
  NodeId body = file.loop_body(loop);
  if (body == kNoNode) return false;
  for (NodeId id = body; id < tree.node(body).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if ((k == NodeKind::kForStatement || k == NodeKind::kWhileStatement) &&
        !tree.contains(id, site) && is_step_loop(file, id)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool container_bounded_elsewhere(const FileAnalysis& file, const std::string& path,
                                 EmptiedWhen when) {
  const SyntaxTree& tree = file.tree();
  // For graphs an emptying counts only where it runs every step: a list
  // cleared by an epoch-end hook keeps one graph per step until then.
  auto in_time = [&](NodeId at) {
    if (when == EmptiedWhen::kAnywhere) return true;
    if (!file.runs_per_step(file.scope_index_of(at))) return file.innermost_loop(at) != kNoNode;
    // A method run per step by name alone (a hook) empties every step; one
    // the file calls empties every step only if a call runs every step, not
    // once per epoch beside the step loop (`stat_col.empty()` before the
    // episode loop).
    const Scope& scope = file.scope_of(at);
    if (scope.class_node == kNoNode) return true;
    for (NodeId l = file.innermost_loop(at); l != kNoNode; l = file.outer_loop(l)) {
      if (is_step_loop(file, l)) return true;  // a loop over keys in `empty()` is none
    }
    const std::vector<NodeId>& calls = file.calls_named(scope.name);
    if (calls.empty()) return true;
    for (NodeId call : calls) {
      if (!runs_beside_a_step_loop(file, call)) return true;
    }
    return false;
  };
  for (std::string_view m : {"clear", "pop", "popleft", "popitem", "remove"}) {
    for (NodeId call : file.calls_named(m)) {
      NodeId receiver = file.method_receiver(call);
      // `self.inputs[obj].pop(frame)` empties what `self.inputs[obj][frame] = x` fills.
      if (receiver != kNoNode && container_path(file, receiver) == path && in_time(call)) {
        return true;
      }
    }
  }
  for (NodeId id : file.delete_statements()) {
    if (!in_time(id)) continue;
    for (NodeId t = id; t < tree.node(id).subtree_end; ++t) {
      if (tree.kind(t) == NodeKind::kSubscript &&
          dotted_text(tree, tree.child_by_field(t, Field::kValue)) == path) {
        return true;
      }
    }
  }
  // `self.outputs[key] = []` in a method that runs again (not only from
  // __init__): each slot is emptied, so what was appended to it goes.
  // Not a lazy initialisation (`if self.stats[k] is None: self.stats[k] = {}`),
  // which fills a slot once.
  for (NodeId id : file.slot_assignments_to(path)) {
    NodeId right = tree.child_by_field(id, Field::kRight);
    const Scope& scope = file.scope_of(id);
    if (right != kNoNode && is_empty_value(file, right) && scope.name != "__init__" &&
        !called_only_from_init(file, scope.name) && !initialises_on_first_use(file, id, path) &&
        in_time(id)) {
      return true;
    }
  }
  int rebindings = 0;
  for (NodeId id : file.assignments_to(path)) {
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (right == kNoNode) continue;
    if (tree.kind(right) == NodeKind::kCall &&
        (file.keyword_argument(right, "maxlen") != kNoNode ||
         (vocabulary::last_component(file.qualified_name(file.callee(right))) == "deque" &&
          file.positional_arguments(right).size() >= 2))) {
      return true;  // deque(maxlen=N), deque(items, N)
    }
    if (tree.kind(right) == NodeKind::kCall &&
        file.qualified_name(file.callee(right)).rfind("weakref.", 0) == 0) {
      return true;  // entries go when their keys or values are collected
    }
    // c = c[-N:] and the like: slicing keeps it bounded.
    if (tree.kind(right) == NodeKind::kSubscript &&
        dotted_text(tree, tree.child_by_field(right, Field::kValue)) == path) {
      return true;
    }
    if (mentions(file, right, path) || binds_only_when_unset(file, id, path)) continue;
    // A rebinding that starts it afresh: for an attribute, any outside
    // __init__ (a reset method); for a name, any after the first, which
    // created it.
    const Scope& scope = file.scope_of(id);
    if (path.rfind("self.", 0) == 0) {
      if (scope.name != "__init__" && !called_only_from_init(file, scope.name) && in_time(id)) {
        return true;
      }
    } else if (++rebindings > 1 && in_time(id)) {
      return true;
    }
  }
  return false;
}

bool is_graph_sum(const FileAnalysis& file, const StoreEvent& store) {
  if (!(store.value_bits & kCarriesGraph)) return false;
  if (store.kind == StoreKind::kSelfUpdate) return true;
  if (store.kind != StoreKind::kAugmented || store.value == kNoNode) return false;
  NodeKind k = file.tree().kind(store.value);
  return k != NodeKind::kList && k != NodeKind::kTuple && k != NodeKind::kListComprehension;
}

bool sum_restarted_every_step(const FileAnalysis& file, const std::string& path) {
  // A meter's `reset()` (`self.sum = 0`) runs once per epoch or never: the
  // sum keeps every step's graph until then. Only a restart inside a loop or
  // in a function that runs per step (or `self.sum = self.sum.detach()`
  // there) bounds it to a step or two.
  const SyntaxTree& tree = file.tree();
  for (NodeId id : file.assignments_to(path)) {
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (right == kNoNode) continue;
    bool detaches =
        tree.kind(right) == NodeKind::kCall &&
        (file.callee_last_name(right) == "detach" || file.callee_last_name(right) == "item");
    if (mentions(file, right, path) && !detaches) continue;
    if (binds_only_when_unset(file, id, path)) continue;  // the first value, not a restart
    std::size_t scope = file.scope_index_of(id);
    const Scope& s = file.scopes()[scope];
    if (s.name == "__init__" || called_only_from_init(file, s.name)) continue;
    if (file.runs_per_step(scope) || file.innermost_loop(id) != kNoNode) return true;
  }
  return false;
}

bool guarded_by_flag_turned_off(const FileAnalysis& file, NodeId site) {
  const SyntaxTree& tree = file.tree();
  std::size_t scope = file.scope_index_of(site);
  for (NodeId p = tree.parent(site), child = site; p != kNoNode; child = p, p = tree.parent(p)) {
    if (file.scope_index_of(p) != scope && p != file.scopes()[scope].node) break;
    if (tree.kind(p) != NodeKind::kIfStatement || tree.node(child).field == Field::kCondition) {
      continue;
    }
    NodeId condition = tree.child_by_field(p, Field::kCondition);
    if (condition == kNoNode) continue;
    std::vector<std::string> flags;
    for (NodeId id = condition; id < tree.node(condition).subtree_end; ++id) {
      NodeKind k = tree.kind(id);
      if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
      NodeId parent = tree.parent(id);
      if (parent != kNoNode && tree.kind(parent) == NodeKind::kAttribute &&
          tree.node(id).field == Field::kObject) {
        continue;  // `self` of `self.flag`: the attribute itself is checked
      }
      if (parent != kNoNode && tree.kind(parent) == NodeKind::kCall) continue;  // a callee
      std::string d = dotted_text(tree, id);
      if (!d.empty()) flags.push_back(d);
    }
    for (const auto& f : flags) {
      if (file.switched_off_somewhere(vocabulary::last_component(f))) return true;
    }
  }
  return false;
}

namespace {

// The stored value is the loss this step backpropagates: `loss.backward()`
// in the storing function, or the loss a Lightning `training_step` returns
// (Lightning calls backward on it). Backward frees the graph's saved
// activations, so keeping that loss keeps graph nodes only, and a list of
// them emptied at epoch end is Lightning's own migration-guide pattern.
bool is_backpropagated_loss(const FileAnalysis& file, const StoreEvent& store) {
  const SyntaxTree& tree = file.tree();
  if (store.value == kNoNode || tree.kind(store.value) != NodeKind::kIdentifier) return false;
  std::string_view name = tree.text(store.value);
  for (NodeId call : file.calls_named("backward")) {
    NodeId receiver = file.method_receiver(call);
    if (receiver != kNoNode && file.scope_index_of(call) == store.scope &&
        tree.text(receiver) == name) {
      return true;
    }
  }
  // A dict or outputs returned beside the loss are kept whole: Lightning
  // backpropagates its `loss` entry only.
  const Scope& scope = file.scopes()[store.scope];
  if (scope.name != "training_step" || (store.value_bits & kNonScalar)) return false;
  for (NodeId id = scope.node; id < tree.node(scope.node).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kReturnStatement || file.scope_index_of(id) != store.scope) {
      continue;
    }
    NodeId returned = tree.first_named_child(id);
    if (returned != kNoNode && tree.text(returned) == name) return true;
  }
  return false;
}

// A running sum of graphs is bounded only by a restart every step; other
// containers by any bound or reset the file applies to them.
bool bounded_elsewhere(const FileAnalysis& file, const StoreEvent& store,
                       const std::string& container) {
  if (is_graph_sum(file, store)) return sum_restarted_every_step(file, container);
  // Kept graphs (appended, not summed) likewise: emptied by an epoch-end hook,
  // the list holds every step's graph until then.
  return container_bounded_elsewhere(
      file, container,
      (store.value_bits & kCarriesGraph) && !is_backpropagated_loss(file, store)
          ? EmptiedWhen::kEveryStep
          : EmptiedWhen::kAnywhere);
}

}  // namespace

GrowthVerdict store_growth(const FileAnalysis& file, const StoreEvent& store) {
  GrowthVerdict v;
  bool sized_key = false;
  v.container = container_path(file, store.container);
  if (v.container.empty()) return v;
  switch (store.kind) {
    case StoreKind::kLocalName:
    case StoreKind::kAttribute:
    case StoreKind::kGlobalName:
      return v;  // a binding overwrites; it does not accumulate
    case StoreKind::kSubscript:
      // `buffer[i] = x` into a preallocated tensor copies in place: no new
      // tensor is kept. A value with a graph is another matter: each write
      // records a CopySlices node over the buffer's previous version, so the
      // buffer keeps every write's graph whatever the key
      // (BorealisAI/advertorch#73).
      if (container_is_tensor(file, v.container)) {
        if (!(store.value_bits & kCarriesGraph)) return v;
        v.into_tensor = true;
        break;
      }
      // A slice or a multi-dimensional index writes into existing slots; so
      // does any index into a list made at a fixed length. Graphs written so
      // into a tensor still chain (above); into a list, they replace a slot.
      if (key_indexes_an_array(file, store.key)) {
        if (!(store.value_bits & kCarriesGraph)) return v;
        v.into_tensor = true;
        break;
      }
      if (container_is_fixed_list(file, v.container, store.site)) return v;
      // `states[i] = states[i].to(device)`: the slot replaced by a copy of itself.
      if (replaces_slot_with_itself(file, store)) return v;
      if (key_varies_with_sizes(file, store.key)) {
        sized_key = true;
      } else if (!key_varies_per_step(file, store.key)) {
        return v;
      }
      break;
    default:
      break;
  }
  // Recorded only until a flag is switched off (the first iteration's order).
  // Not for graphs: even a bounded record of them keeps every activation.
  if (!(store.value_bits & kCarriesGraph) && guarded_by_flag_turned_off(file, store.site)) return v;
  const Scope& scope = file.scopes()[store.scope];
  std::string root = root_of(v.container);
  bool through_self = root == "self" || root == "cls";
  bool declared_global = scope.declared_global.count(root) != 0;
  bool closure_or_global =
      store.scope != 0 && !scope.assigned.count(root) && !is_parameter(scope, root);
  // `def log(out, history=[])`: the default list is shared by every call.
  bool mutable_default = scope.mutable_defaults.count(root) != 0;
  v.local = !(through_self || declared_global || closure_or_global || mutable_default);

  NodeId loop = file.innermost_loop(store.site);
  if (loop != kNoNode) {
    int outlived = 0;
    for (NodeId l = loop; l != kNoNode; l = file.outer_loop(l)) {
      if (reset_in_loop(file, v.container, l, store.scope, store.site,
                        !(store.value_bits & kCarriesGraph))) {
        break;
      }
      ++outlived;
    }
    if (outlived == 0) return v;
    if (!v.local && bounded_elsewhere(file, store, v.container)) return v;
    // A loop over a collection (parameters, layers, outputs) in a function
    // that runs once, at setup, fills the container once: it grows across
    // steps only when a loop around it is a step loop or the function runs
    // per step, as outside loops.
    if (!v.local && !any_step_loop(file, loop, outlived) &&
        (scope.name == "__init__" ||
         (!file.runs_per_step(store.scope) && store.kind != StoreKind::kSubscript))) {
      return v;
    }
    v.growth = Growth::kPerIteration;
    v.loop = loop;
    v.loops_outlived = v.local ? outlived : outlived + 1;
    return v;
  }
  // Outside loops: only a container that outlives the call, in a function
  // that runs once per step, or a cache that gains an entry per new size.
  // `stat_col["loss"] = loss` / `meter.update(loss)` on an object the caller
  // hands in, in a function that runs per step: the object keeps the value in
  // its own attributes, and it was made to outlive the call.
  bool object_keeps_it = store.keeping_function != static_cast<std::size_t>(-1) &&
                         file.scopes()[store.keeping_function].class_node != kNoNode &&
                         is_parameter(scope, root) && root == v.container &&
                         file.runs_per_step(store.scope);
  if (object_keeps_it && !bounded_elsewhere(file, store, v.container)) {
    v.growth = Growth::kPerCall;
    return v;
  }
  if (store.scope == 0 || scope.name == "__init__" || v.local ||
      (!through_self && !mutable_default && is_parameter(scope, root))) {
    return v;
  }
  if (bounded_elsewhere(file, store, v.container)) return v;
  if (sized_key) {
    v.growth = Growth::kPerSize;
    return v;
  }
  bool counted_key = store.kind == StoreKind::kSubscript;  // a step counter as key
  // A module's forward runs on every step; the inference that its input
  // carries a graph is the inference that it runs in training.
  if (!counted_key && !file.runs_per_step(store.scope) && !store.graph_from_forward_input) {
    return v;
  }
  v.growth = Growth::kPerCall;
  return v;
}

}  // namespace gpuleak::lint
