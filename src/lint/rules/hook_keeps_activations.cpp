// GL202: a forward/backward hook saves the tensors it sees into a container
// outside the hook, one more per call.
#include <fmt/format.h>

#include <algorithm>

#include "lint/fix_text.h"
#include "lint/object_repetition.h"
#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL202",
    "hook-keeps-activations",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "A module or tensor hook saves activations into a container that grows on every call.",
    "A forward or backward hook runs on every call of its module, every training step. A tensor "
    "it appends to a list (or stores under a new key) outside the hook stays on the GPU for as "
    "long as that container lives, so memory grows step by step; if the tensor still has its "
    "graph (no `.detach()`), the whole step's activations stay with it.",
    "Keep only what the current step needs: overwrite one slot (`features[name] = "
    "output.detach()`), move it off the GPU (`output.detach().cpu()`), clear the container after "
    "each step, or remove the hook (`handle.remove()`) when done.",
};

// The container a hook stores into is reached through self, a global or a
// closure variable; not a local the hook fetches on each call
// (`collected = _active_collector.get()`), which keeps nothing between calls.
bool outlives_the_hook(const FileAnalysis& file, const StoreEvent& store) {
  const Scope& hook = file.scopes()[store.scope];
  std::string container = container_path(file, store.container);
  if (container.empty()) return false;
  std::string root = container.substr(0, container.find('.'));
  bool outer = root == "self" || hook.declared_global.count(root) || !hook.assigned.count(root);
  for (const auto& p : hook.parameters) {
    if (p == root && root != "self") outer = false;
  }
  if (!outer || root == "self" || hook.declared_global.count(root)) return outer;
  // A list of the function around the hook, made afresh by it, while that
  // call also removes the hooks it registers (`handle.remove()`): the list
  // lives for one call (diffusers sana's discriminator forward()).
  NodeId around = file.tree().parent(hook.definition);
  std::size_t enclosing = around != kNoNode ? file.scope_index_of(around) : 0;
  if (enclosing == 0) return outer;
  const Scope& owner = file.scopes()[enclosing];
  if (!owner.assigned.count(root)) return outer;
  const SyntaxTree& tree = file.tree();
  for (NodeId c = owner.node; c < tree.node(owner.node).subtree_end; ++c) {
    if (tree.kind(c) == NodeKind::kCall && file.scope_index_of(c) == enclosing &&
        file.callee_last_name(c) == "remove" && file.method_receiver(c) != kNoNode &&
        file.positional_arguments(c).empty()) {
      return false;
    }
  }
  return outer;
}

// The hook refers to the object whose __init__ registers it: a bound
// method (`self.save_activation`), or a nested def or lambda that uses
// `self`. The module's hook dict then holds the object; "" when not.
std::string hook_holding_its_owner(const FileAnalysis& file, NodeId fn) {
  const SyntaxTree& tree = file.tree();
  if (fn == kNoNode) return {};
  if (tree.kind(fn) == NodeKind::kAttribute) {
    NodeId object = tree.child_by_field(fn, Field::kObject);
    if (object != kNoNode && tree.text(object) == "self") {
      return fmt::format("`{}` is a bound method, which holds `self`", tree.text(fn));
    }
    return {};
  }
  for (std::size_t hook : file.functions_passed_as(fn)) {
    NodeId node = file.scopes()[hook].node;
    for (NodeId n = node; n < tree.node(node).subtree_end; ++n) {
      if (tree.kind(n) == NodeKind::kIdentifier && tree.text(n) == "self") {
        return fmt::format("the hook `{}` uses `self` (line {}), so its closure holds `self`",
                           file.scopes()[hook].name, tree.start_point(n).row + 1);
      }
    }
  }
  return {};
}

// `layer.register_forward_hook(self.save_activation)` in an __init__, the
// handle dropped, while the object is made anew on every iteration of a
// loop: the layer (or, registered on `self`, a reference cycle) keeps each
// old object alive with what it holds (a model, GPU tensors, the lists the
// hook fills), one more per iteration (jacobgil/pytorch-grad-cam#132,
// pytorch/pytorch#46386).
void report_hook_keeping_its_owner(const FileAnalysis& file, NodeId call, NodeId fn,
                                   const Repetition& again, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  std::size_t scope = file.scope_index_of(call);
  const Scope& where = file.scopes()[scope];
  if (where.name != "__init__" || where.class_node == kNoNode || !again.object_per_iteration) {
    return;
  }
  std::string holds = hook_holding_its_owner(file, fn);
  if (holds.empty()) return;
  const ClassFacts* c = file.class_facts(where.class_node);
  if (c == nullptr) return;
  NodeId receiver = file.method_receiver(call);
  std::string on = receiver != kNoNode ? std::string(tree.text(receiver)) : std::string("self");
  std::string keeper = on == "self"
                           ? std::string(
                                 "the instance's own hook dict holds it: a reference cycle that "
                                 "only the cycle collector frees")
                           : fmt::format("`{}` keeps it for as long as the layer lives", on);
  RuleReport r;
  r.node = call;
  r.message = fmt::format(
      "`{}` drops its handle and {}: {}, so each `{}` stays alive with all it holds (a model, GPU "
      "tensors); {} makes a new one "
      "each time, one more kept per iteration",
      quote(file, call), holds, keeper, c->name, again.why);
  r.fix = fmt::format(
      "keep the handle and remove the hook when the object is done (`self.handles.append({})`, "
      "then `handle.remove()` in a `close()`/`__exit__`), or make the object once outside the "
      "loop",
      quote(file, call, 60));
  sink.report(kInfo, std::move(r));
}

// `self.hook_handlers.append(block.register_forward_hook(...))` in a method
// that runs again and again, while nothing ever empties the list (removing
// the hooks leaves their handles in it): the object keeps one handle, and
// the hook closure with what it references, per registration made.
void check_handles_piling_up(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId call : file.hook_registrations()) {
    NodeId list = tree.parent(call);
    NodeId append = list != kNoNode ? tree.parent(list) : kNoNode;
    if (append == kNoNode || tree.kind(append) != NodeKind::kCall ||
        file.callee_last_name(append) != "append") {
      continue;
    }
    NodeId receiver = file.method_receiver(append);
    std::string handles = receiver != kNoNode ? dotted_text(tree, receiver) : std::string();
    if (handles.rfind("self.", 0) != 0) continue;
    std::size_t scope = file.scope_index_of(call);
    const Scope& where = file.scopes()[scope];
    if (scope == 0 || where.name == "__init__" || where.class_node == kNoNode) continue;
    if (container_bounded_elsewhere(file, handles)) continue;
    // Run again: per step, or called by another method than __init__.
    std::string caller;
    if (!file.runs_per_step(scope)) {
      for (NodeId other : file.calls_named(where.name)) {
        const Scope& from = file.scope_of(other);
        if (file.scope_index_of(other) != 0 && from.name != "__init__" &&
            from.class_node == where.class_node) {
          caller = from.name;
          break;
        }
      }
      if (caller.empty()) continue;
    }
    RuleReport r;
    r.node = append;
    r.message = fmt::format(
        "`{}` keeps the handle of a hook registered on every call of `{}`{}, and nothing empties "
        "`{}`: removing the hooks leaves their handles (and the hook closures) in it, one set "
        "more per call",
        quote(file, append), where.name,
        caller.empty() ? std::string() : fmt::format(" (called from `{}`)", caller), handles);
    r.fix = fmt::format(
        "empty the list once the hooks are removed (`{} = []` after `handle.remove()`), or "
        "register the hooks once",
        handles);
    sink.report(kInfo, std::move(r));
  }
}

// `layer.register_forward_hook(handle)` in code that runs more than once
// (a function, or the __init__ of a class built inside one), with the
// returned handle dropped: the hooks pile up on the module, and those of
// earlier calls keep appending every output although nothing reads them.
void check_hooks_never_removed(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId call : file.hook_registrations()) {
    NodeId statement = tree.parent(call);
    if (statement == kNoNode || tree.kind(statement) != NodeKind::kExpressionStatement) continue;
    std::size_t scope = file.scope_index_of(call);
    if (scope == 0) continue;
    // The registering code runs repeatedly: its function (for __init__,
    // the function that builds the object) is called in a loop or a
    // comprehension, or once per step.
    Repetition again = runs_again(file, scope, 0);
    if (!again.repeated) continue;
    std::vector<NodeId> args = file.positional_arguments(call);
    NodeId fn = !args.empty() ? args.front() : file.keyword_argument(call, "hook");
    bool accumulates = false;
    for (std::size_t hook : file.functions_passed_as(fn)) {
      for (const StoreEvent& store : file.stores()) {
        if (store.scope == hook &&
            (store.kind == StoreKind::kAppend || store.kind == StoreKind::kExtend) &&
            (store.value_bits & kDeviceTensor) && outlives_the_hook(file, store)) {
          accumulates = true;
        }
      }
    }
    if (!accumulates) {
      report_hook_keeping_its_owner(file, call, fn, again, sink);
      continue;
    }
    std::string_view runs = again.runner;
    RuleReport r;
    r.node = call;
    r.message = fmt::format(
        "`{}` registers a hook that collects tensors and drops its handle: every call of `{}` "
        "adds another hook to the module, and the hooks of earlier calls keep collecting "
        "every output, never released",
        quote(file, call), runs);
    r.fix =
        "keep the handle and remove the hook when done (`handle = "
        "layer.register_forward_hook(...)` ... `handle.remove()`), or register it once";
    sink.report(kInfo, std::move(r));
  }
  check_handles_piling_up(file, sink);
}

void check(const FileAnalysis& file, FindingSink& sink) {
  for (const StoreEvent& store : file.stores()) {
    if (!file.is_hook_scope(store.scope)) continue;
    if (!(store.value_bits & (kDeviceTensor | kCarriesGraph))) continue;
    bool grows = false;
    switch (store.kind) {
      case StoreKind::kAppend:
      case StoreKind::kExtend:
      case StoreKind::kSelfUpdate:
        grows = true;
        break;
      case StoreKind::kSubscript:
        grows = key_varies_per_step(file, store.key);
        break;
      case StoreKind::kAugmented: {
        NodeKind k = file.tree().kind(store.value);
        grows = k == NodeKind::kList || k == NodeKind::kTuple;
        break;
      }
      default:
        break;
    }
    if (!grows) continue;
    const Scope& hook = file.scopes()[store.scope];
    std::string container = container_path(file, store.container);
    if (container.empty() || !outlives_the_hook(file, store)) continue;
    if (container_bounded_elsewhere(file, container)) continue;
    if (guarded_by_flag_turned_off(file, store.site)) continue;
    RuleReport r;
    r.node = store.site;
    r.message = fmt::format(
        "the hook `{}` stores `{}` in `{}` on every call of its module: one activation tensor "
        "more per step, never released",
        hook.name, quote(file, store.value, 40), container);
    std::string v = whole_code(file, store.value, 40);
    r.fix = v.empty() ? fmt::format(
                            "overwrite one slot per module instead of appending, store host "
                            "copies (`.detach().cpu()`), or call `{}.clear()` after each step",
                            container)
                      : fmt::format(
                            "overwrite one slot per module (`{}[name] = {}.detach()`), store "
                            "`{}.detach().cpu()`, or call `{}.clear()` after each step",
                            container, v, v, container);
    sink.report(kInfo, std::move(r));
  }
  check_hooks_never_removed(file, sink);
}

}  // namespace

std::unique_ptr<Rule> make_hook_keeps_activations_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
