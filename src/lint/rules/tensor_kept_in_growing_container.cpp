// GL201: GPU tensors (without a graph) stored every step into a container
// that outlives the loop: an attribute, a global, a cache keyed by step, a
// list kept across epochs.
#include <fmt/format.h>

#include <algorithm>

#include "lint/fix_text.h"
#include "lint/lightning_hooks.h"
#include "lint/object_repetition.h"
#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL201",
    "tensor-kept-in-growing-container",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "GPU tensors are stored every step into a container that is never emptied.",
    "A stored tensor stays allocated on the GPU for as long as the container references it. A "
    "container that outlives the loop (an attribute, a global, a cache keyed by step, a list "
    "kept across epochs) gains one tensor per step, so allocated memory grows linearly until it "
    "is cleared. `.detach()` drops the autograd graph but not the tensor itself.",
    "Store Python numbers (`.item()`) or host copies (`.detach().cpu()`), bound the container "
    "(`collections.deque(maxlen=N)`), or clear it once it has been used (for example at the end "
    "of each epoch).",
};

// `hist = torch.cat([hist, out])` and `seen = seen + [x]` grow; arithmetic
// (`model_pred = model_pred * (-sigmas) + noisy_model_input`, diffusers'
// EDM preconditioning) makes a new tensor of the same size and frees the
// old one: without a graph (GL101's case) nothing is kept.
bool self_update_grows(const FileAnalysis& file, const StoreEvent& store) {
  const SyntaxTree& tree = file.tree();
  NodeId right = tree.child_by_field(store.site, Field::kRight);
  while (right != kNoNode && tree.kind(right) == NodeKind::kParenthesizedExpression) {
    right = tree.first_named_child(right);
  }
  if (right == kNoNode || tree.kind(right) != NodeKind::kBinaryOperator) return true;
  std::vector<NodeId> stack{right};
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (n == kNoNode) continue;
    switch (tree.kind(n)) {
      case NodeKind::kBinaryOperator:
        stack.push_back(tree.child_by_field(n, Field::kLeft));
        stack.push_back(tree.child_by_field(n, Field::kRight));
        break;
      case NodeKind::kParenthesizedExpression:
        stack.push_back(tree.first_named_child(n));
        break;
      case NodeKind::kList:
      case NodeKind::kTuple:
      case NodeKind::kListComprehension:
        return true;  // `seen = seen + [x]`
      default:
        break;
    }
  }
  return false;
}

bool is_growing_kind(const FileAnalysis& file, const StoreEvent& store) {
  switch (store.kind) {
    case StoreKind::kAppend:
    case StoreKind::kExtend:
    case StoreKind::kSubscript:
    case StoreKind::kSelfUpdate:
      return self_update_grows(file, store);
    case StoreKind::kAugmented: {
      // `outputs += [out]` grows a list; `total += x` replaces a number.
      NodeKind k = file.tree().kind(store.value);
      return k == NodeKind::kList || k == NodeKind::kTuple || k == NodeKind::kListComprehension;
    }
    default:
      return false;
  }
}

// Collecting one evaluation pass (or one epoch) into a local list is what
// the list is for. It becomes a leak when the list survives every loop of
// its function and those loops are training steps (backward, optimizer
// step, an endless loop), or span several epochs of batches.
// `return torch.cat(cross_attentions)` after the loop: the function uses what
// it collected for its result.
bool used_after_loop(const FileAnalysis& file, const std::string& name, NodeId loop,
                     std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  NodeId root = file.scopes()[scope].node;
  for (NodeId id = tree.node(loop).subtree_end; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kIdentifier && file.scope_index_of(id) == scope &&
        tree.text(id) == name) {
      return true;
    }
  }
  return false;
}

// Whether every backward() and optimizer step in `loop` runs in a loop
// nested in it, and there is at least one.
bool steps_only_in_nested_loops(const FileAnalysis& file, NodeId loop) {
  const SyntaxTree& tree = file.tree();
  bool any = false;
  for (NodeId c = loop; c < tree.node(loop).subtree_end; ++c) {
    if (tree.kind(c) != NodeKind::kCall) continue;
    if (!file.is_backward_call(c) && !file.is_optimizer_step_call(c)) continue;
    if (file.innermost_loop(c) == loop) return false;
    any = true;
  }
  return any;
}

bool local_container_grows_for_the_whole_run(const FileAnalysis& file, const StoreEvent& store,
                                             const GrowthVerdict& growth) {
  int depth = 0;
  for (NodeId l = growth.loop; l != kNoNode; l = file.outer_loop(l)) ++depth;
  if (growth.loops_outlived < depth) return false;  // reset by an outer (epoch) loop
  bool training = false;
  int count = growth.loops_outlived;
  for (NodeId l = growth.loop; l != kNoNode && count > 0; l = file.outer_loop(l), --count) {
    if (is_small_constant_loop(file, l)) return false;  // a few known iterations
    training |=
        loop_calls_backward(file, l) || loop_steps_optimizer(file, l) || file.is_unbounded_loop(l);
  }
  bool steps = false;
  NodeId outermost = growth.loop;
  for (NodeId l = growth.loop; l != kNoNode; l = file.outer_loop(l)) {
    steps |= loop_calls_backward(file, l) || loop_steps_optimizer(file, l) ||
             iterates_over_batches(file, l);
    outermost = l;
  }
  // A decoding loop (`while True` ... `break`, over no batches) whose
  // collection the function uses once it ends: the list is the call's result.
  if (!steps && used_after_loop(file, growth.container, outermost, store.scope)) return false;
  // One detached number per step, collected by a function for its result
  // (`return sum(losses) / len(losses)`): a few bytes a step, freed when
  // the function returns, not a growing store.
  if (store.scope != 0 && !(store.value_bits & kNonScalar) &&
      (store.kind == StoreKind::kAppend || store.kind == StoreKind::kExtend) &&
      used_after_loop(file, growth.container, outermost, store.scope)) {
    return false;
  }
  // One result per round of an inner optimisation (null-text inversion's
  // embedding per inference step: the loop's backward() and step() are in
  // a loop nested in it), collected for the function's result.
  if (growth.loops_outlived == 1 && steps_only_in_nested_loops(file, growth.loop) &&
      used_after_loop(file, growth.container, growth.loop, store.scope)) {
    return false;
  }
  if (training) return true;
  return growth.loops_outlived >= 2 && any_step_loop(file, growth.loop, growth.loops_outlived);
}

// `_log_metrics(logs, z)`: the container is an argument of the call to a
// function of the file that stores into it (not the receiver of a method
// that keeps its argument).
bool container_handed_to_keeper(const FileAnalysis& file, const StoreEvent& store) {
  if (store.keeping_function == static_cast<std::size_t>(-1)) return false;
  const SyntaxTree& tree = file.tree();
  NodeId list = tree.parent(store.container);
  return list != kNoNode && tree.kind(list) == NodeKind::kArgumentList &&
         tree.parent(list) == store.site;
}

// A prediction hook (`on_predict_batch_end`) appending to a
// container emptied only outside the per-batch code: an epoch-end reset
// bounds it to one pass, and one prediction pass is every batch of the data
// set, all held on the GPU until it ends (pytorch-forecasting #2224).
bool kept_for_the_prediction_pass(const FileAnalysis& file, const StoreEvent& store) {
  if (!is_predict_batch_hook(file, store.scope) || store.container == kNoNode) return false;
  if (store.kind != StoreKind::kAppend && store.kind != StoreKind::kExtend) return false;
  if (!(store.value_bits & kNonScalar)) return false;
  return !container_bounded_elsewhere(file, container_path(file, store.container),
                                      EmptiedWhen::kEveryStep);
}

// " (`outputs` is what Lightning hands `on_predict_batch_end`: ...)" when the
// tensor-ness comes from a hook's documented signature; empty otherwise.
std::string parameter_evidence(const FileAnalysis& file, const StoreEvent& store) {
  std::string why = lightning_parameter_evidence(file, store.scope, store.parameter_sources);
  return why.empty() ? why : fmt::format(" ({})", why);
}

void report_prediction_pass(const FileAnalysis& file, const StoreEvent& store, FindingSink& sink) {
  std::string c = container_path(file, store.container);
  RuleReport r;
  r.node = store.site;
  r.message = fmt::format(
      "`{}` keeps a GPU tensor in `{}` for every batch of the prediction pass, and `{}` is "
      "emptied only after the pass: the GPU holds every batch's tensors until it ends{}",
      quote(file, store.site), c, c, parameter_evidence(file, store));
  r.fix = fmt::format("{}, and collate them after the pass",
                      store_instead(file, store.value, store.value_bits));
  sink.report(kInfo, std::move(r));
}

// A dict (by its first binding: `{}`, `dict()`, `defaultdict(...)`,
// `OrderedDict()`); a WeakKeyDictionary holds its keys weakly and is none.
bool bound_to_a_dict(const FileAnalysis& file, const std::string& path) {
  NodeId value = file.first_assigned_value(path);
  if (value == kNoNode) return false;
  const SyntaxTree& tree = file.tree();
  if (tree.kind(value) == NodeKind::kDictionary) return true;
  if (tree.kind(value) != NodeKind::kCall) return false;
  std::string_view last = file.callee_last_name(value);
  return last == "dict" || last == "defaultdict" || last == "OrderedDict";
}

// What shows that the parameter `name` of `scope` is a tensor: a caller
// that checks or uses what it passes as one (`assert isinstance(tensor,
// torch.Tensor)`, `tensor.numel()`). "" when only the flow says so.
std::string tensor_key_evidence(const FileAnalysis& file, std::size_t scope,
                                std::string_view name) {
  const SyntaxTree& tree = file.tree();
  const Scope& where = file.scopes()[scope];
  std::size_t index = where.parameters.size();
  for (std::size_t i = 0; i < where.parameters.size(); ++i) {
    if (where.parameters[i] == name) index = i;
  }
  if (index == where.parameters.size()) return {};
  if (!where.parameters.empty() && where.parameters[0] == "self") --index;
  for (NodeId call : file.calls_named(where.name)) {
    std::size_t caller = file.scope_index_of(call);
    std::vector<NodeId> args = file.positional_arguments(call);
    if (caller == scope || index >= args.size()) continue;
    std::string_view passed = tree.text(args[index]);
    const Scope& from = file.scopes()[caller];
    for (NodeId c = from.node; c < tree.node(from.node).subtree_end; ++c) {
      if (tree.kind(c) != NodeKind::kCall || file.scope_index_of(c) != caller) continue;
      NodeId receiver = file.method_receiver(c);
      std::string_view method = file.callee_last_name(c);
      bool shows = false;
      if (receiver != kNoNode && tree.text(receiver) == passed) {
        for (std::string_view m : {"numel", "element_size", "storage", "dim", "detach", "cpu",
                                   "cuda", "data_ptr", "untyped_storage"}) {
          shows |= method == m;
        }
      } else if (method == "isinstance") {
        std::vector<NodeId> checked = file.positional_arguments(c);
        shows = checked.size() == 2 && tree.text(checked[0]) == passed &&
                tree.text(checked[1]).find("Tensor") != std::string_view::npos;
      }
      if (shows) {
        return fmt::format(" (`{}` at line {} shows that `{}`, which `{}` passes, is a tensor)",
                           quote(file, c, 40), tree.start_point(c).row + 1, passed,
                           quote(file, call, 40));
      }
    }
  }
  return {};
}

// `self.tensor_name[tensor] = name`: a dict keyed by the tensor itself holds
// the tensor as long as the dict lives, whatever the value is, one more per
// new tensor (pytorch_memlab#18, fixed by keying with `id(tensor)`). The
// dict outlives the call (an attribute or a module global), the function
// runs again, and nothing empties the dict.
void check_tensor_keys(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId n = 0; n < tree.size(); ++n) {
    if (tree.kind(n) != NodeKind::kAssignment) continue;
    NodeId target = tree.child_by_field(n, Field::kLeft);
    if (target == kNoNode || tree.kind(target) != NodeKind::kSubscript) continue;
    NodeId key = tree.child_by_field(target, Field::kSubscriptIndex);
    NodeId container = tree.child_by_field(target, Field::kValue);
    if (key == kNoNode || container == kNoNode) continue;
    NodeKind k = tree.kind(key);
    if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
    std::size_t scope = file.scope_index_of(n);
    if (scope == 0 || file.is_hook_scope(scope)) continue;
    // A new key on each call: the function is handed it. A key the function
    // builds (`key = tuple(handles)`, torch's FSDP) names one slot per group.
    const std::vector<std::string>& parameters = file.scopes()[scope].parameters;
    if (k != NodeKind::kIdentifier ||
        std::find(parameters.begin(), parameters.end(), tree.text(key)) == parameters.end()) {
      continue;
    }
    std::string path = container_path(file, container);
    bool global =
        file.scopes()[scope].declared_global.count(path) != 0 ||
        (!file.scopes()[scope].assigned.count(path) && path.find('.') == std::string::npos &&
         !file.assignments_in_scope(path, 0).empty());
    if (path.rfind("self.", 0) != 0 && !global) continue;
    if (!bound_to_a_dict(file, path) || container_bounded_elsewhere(file, path)) continue;
    Repetition again = runs_again(file, scope);
    if (!again.repeated) continue;
    // A tensor by the flow, or by what a caller does with what it passes.
    std::string evidence = tensor_key_evidence(file, scope, tree.text(key));
    if (!(file.value_bits(key) & kDeviceTensor) && evidence.empty()) continue;
    RuleReport r;
    r.node = n;
    r.message = fmt::format(
        "`{}` keys `{}` by the tensor `{}` itself{}: a dict holds its keys, so every tensor "
        "stored here stays allocated as long as `{}` lives, and {}: one tensor more per new key",
        quote(file, n), path, tree.text(key), evidence, path, again.why);
    r.fix = fmt::format(
        "key `{}` by `id({})` (or use a `weakref.WeakKeyDictionary`), or empty it when done", path,
        tree.text(key));
    sink.report(kInfo, std::move(r));
  }
}

void check(const FileAnalysis& file, FindingSink& sink) {
  check_tensor_keys(file, sink);
  for (const StoreEvent& store : file.stores()) {
    if (!(store.value_bits & kDeviceTensor)) continue;
    if (store.value_bits & (kCarriesGraph | kException)) continue;  // GL101/GL102, GL203
    if (file.is_hook_scope(store.scope) || !is_growing_kind(file, store)) continue;
    GrowthVerdict growth = store_growth(file, store);
    if (growth.growth == Growth::kBounded) {
      if (kept_for_the_prediction_pass(file, store)) report_prediction_pass(file, store, sink);
      continue;
    }
    if (growth.growth == Growth::kPerIteration && growth.local &&
        !local_container_grows_for_the_whole_run(file, store, growth)) {
      continue;
    }
    // One number per epoch (`valid_losses.append(total / n)` after the
    // batch loop): a few bytes a run, not a growing store.
    if (growth.growth == Growth::kPerIteration && !(store.value_bits & kNonScalar) &&
        !iterates_over_batches(file, growth.loop) && !loop_runs_a_step(file, growth.loop) &&
        !file.is_unbounded_loop(growth.loop)) {
      continue;
    }
    RuleReport r;
    r.node = store.site;
    const std::string& c = growth.container;
    if (growth.growth == Growth::kPerSize) {
      r.message = fmt::format(
          "`{}` caches a GPU tensor in `{}` under a key built from input sizes, and nothing "
          "evicts entries: one tensor more for every new size (batch size, sequence length)",
          quote(file, store.site), c);
      r.fix = fmt::format(
          "bound `{}` (evict old keys, or `functools.lru_cache(maxsize=N)`), or allocate once at "
          "the largest size and slice it",
          c);
      sink.report(kInfo, std::move(r));
      continue;
    }
    std::string when = growth.growth == Growth::kPerCall
                           ? fmt::format("every call of `{}`", file.scopes()[store.scope].name)
                       : growth.loops_outlived >= 2 ? std::string("every step of every epoch")
                                                    : std::string("every iteration");
    if (store.closure) {
      r.message = fmt::format(
          "`{}` queues a closure that captures GPU tensors in `{}` on {}, and `{}` is never "
          "emptied: the captured tensors of every step stay allocated",
          quote(file, store.site), c, when, c);
      r.fix = fmt::format(
          "capture host copies or numbers in the closure (`.cpu()`, `.item()`), or empty `{}` "
          "once its callables have run (`{}.clear()`)",
          c, c);
    } else if (container_handed_to_keeper(file, store)) {
      // The store is in a helper handed the container: name the chain.
      const Scope& keeper = file.scopes()[store.keeping_function];
      r.message = fmt::format(
          "`{}` hands `{}` to `{}`, which stores a GPU tensor in it; the call runs on {}, and "
          "`{}` is never emptied: one tensor more per step",
          quote(file, store.site), c, keeper.name, when, c);
      r.fix = fmt::format(
          "store Python numbers (`.item()`) or host copies (`.detach().cpu()`) in `{}`, or empty "
          "`{}` when its contents have been used",
          keeper.name, c);
    } else {
      r.message = fmt::format(
          "`{}` stores a GPU tensor in `{}` on {}, and `{}` is never emptied: one tensor more "
          "per step",
          quote(file, store.site), c, when, c);
      r.fix = fmt::format("{}, or empty `{}` when its contents have been used (`{}.clear()`)",
                          store_instead(file, store.value, store.value_bits), c, c);
    }
    r.message += parameter_evidence(file, store);
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_tensor_kept_in_growing_container_rule() {
  return make_rule(kInfo, check);
}

}  // namespace gpuleak::lint
