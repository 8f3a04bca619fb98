// GL203: exceptions, tracebacks or sys.exc_info() kept beyond the handler.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL203",
    "exception-kept",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "An exception, traceback or sys.exc_info() result is kept after its handler.",
    "An exception's `__traceback__` references every stack frame it passed through, and each "
    "frame references its local variables, including the CUDA tensors of the step that failed "
    "(the batch, the activations, the loss). While the exception is kept, none of that memory "
    "is released. Python deletes `e` at the end of `except ... as e:` to avoid exactly this; "
    "storing it elsewhere defeats that, and `tb = sys.exc_info()[2]` in a function makes a "
    "reference cycle that holds the frames until the cycle collector runs.",
    "Keep text instead: `errors.append(repr(e))` or `traceback.format_exc()`. If the object is "
    "needed, drop its frames first: `e.with_traceback(None)`. `del` a stored `sys.exc_info()` "
    "before leaving the handler.",
};

// `raise ExceptionGroup("...", errors)` re-raises the collected exceptions:
// keeping them until then is the point.
bool raised_later(const FileAnalysis& file, const std::string& container, std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (tree.kind(id) != NodeKind::kRaiseStatement || file.scope_index_of(id) != scope) continue;
    for (NodeId t = id; t < tree.node(id).subtree_end; ++t) {
      if (tree.kind(t) == NodeKind::kIdentifier && tree.text(t) == container) return true;
    }
  }
  return false;
}

bool deleted_in_scope(const FileAnalysis& file, const std::string& name, std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (tree.kind(id) != NodeKind::kDeleteStatement || file.scope_index_of(id) != scope) continue;
    for (NodeId t = id; t < tree.node(id).subtree_end; ++t) {
      if (tree.kind(t) == NodeKind::kIdentifier && tree.text(t) == name) return true;
    }
  }
  return false;
}

bool inside_handler(const FileAnalysis& file, NodeId node) {
  const SyntaxTree& tree = file.tree();
  for (NodeId p = tree.parent(node); p != kNoNode; p = tree.parent(p)) {
    NodeKind k = tree.kind(p);
    if (k == NodeKind::kExceptClause || k == NodeKind::kExceptGroupClause) return true;
    if (k == NodeKind::kFunctionDefinition || k == NodeKind::kLambda) return false;
  }
  return false;
}

// The container (or attribute owner) outlives the storing call: reached
// through self/cls, a global, or a closure variable.
bool long_lived_root(const FileAnalysis& file, const StoreEvent& store) {
  NodeId target = store.container;
  if (store.kind == StoreKind::kAttribute) {
    target = file.tree().child_by_field(store.container, Field::kObject);
  }
  std::string path = container_path(file, target);
  if (path.empty()) return false;
  std::string root = path.substr(0, path.find('.'));
  if (root == "self" || root == "cls") return true;
  const Scope& scope = file.scopes()[store.scope];
  if (scope.declared_global.count(root)) return true;
  if (store.scope == 0) return false;
  for (const auto& p : scope.parameters) {
    if (p == root) return false;
  }
  return !scope.assigned.count(root);
}

bool is_exc_info_call(const FileAnalysis& file, NodeId value) {
  const SyntaxTree& tree = file.tree();
  while (value != kNoNode && tree.kind(value) == NodeKind::kSubscript) {
    value = tree.child_by_field(value, Field::kValue);
  }
  return value != kNoNode && tree.kind(value) == NodeKind::kCall &&
         file.qualified_name(file.callee(value)) == "sys.exc_info";
}

class ExceptionKept final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    for (const StoreEvent& store : file.stores()) {
      if (!(store.value_bits & kException)) continue;
      RuleReport r;
      r.node = store.site;
      std::string value = quote(file, store.value, 40);
      switch (store.kind) {
        case StoreKind::kLocalName: {
          // Only sys.exc_info() in a function: the frame -> traceback ->
          // frame cycle. Aliasing `e` to a local ends with the call.
          if (store.scope == 0 || !is_exc_info_call(file, store.value)) continue;
          // The cycle needs the traceback to reach this frame: only a
          // function handling the exception itself makes one.
          if (!inside_handler(file, store.site)) continue;
          std::string name(file.text(store.container));
          if (deleted_in_scope(file, name, store.scope)) continue;
          r.message = fmt::format(
              "`{}` keeps the traceback in a local of `{}`: frame and traceback reference each "
              "other, so the failed step's tensors stay alive until the cycle collector runs",
              quote(file, store.site), file.scopes()[store.scope].name);
          r.fix = fmt::format("`del {}` when done with it, or use `traceback.format_exc()`", name);
          break;
        }
        case StoreKind::kAttribute:
        case StoreKind::kGlobalName:
          if (store.kind == StoreKind::kAttribute && !long_lived_root(file, store)) continue;
          r.message = fmt::format(
              "`{}` keeps `{}` after its handler: its traceback holds the frames of the failed "
              "step and every CUDA tensor they reference",
              quote(file, store.site), value);
          r.fix = fmt::format("store `repr({})` or `{}.with_traceback(None)`", value, value);
          break;
        default: {
          std::string container = container_path(file, store.container);
          if (!container.empty() && raised_later(file, container, store.scope)) continue;
          // A local list of errors lives as long as its call; it matters when
          // it outlives the steps of a loop that keeps failing, or the call.
          if (!long_lived_root(file, store)) {
            NodeId loop = file.innermost_loop(store.site);
            if (loop == kNoNode || !any_step_loop(file, loop, 8)) continue;
          }
          r.message = fmt::format(
              "`{}` keeps `{}` in `{}`: each kept traceback holds the frames of a failed step "
              "and every CUDA tensor they reference",
              quote(file, store.site), value, container.empty() ? "a container" : container);
          r.fix =
              fmt::format("store `repr({})` (or `{}.with_traceback(None)`) instead", value, value);
          break;
        }
      }
      sink.report(kInfo, std::move(r));
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_exception_kept_rule() { return std::make_unique<ExceptionKept>(); }

}  // namespace gpuleak::lint
