// GL501: `with DataLoader(...)`, which raises.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL501",
    "dataloader-as-context-manager",
    Severity::kError,
    Cause::kRaisesAtRuntime,
    "A DataLoader is used as a context manager (`with DataLoader(...)`).",
    "`torch.utils.data.DataLoader` defines no `__enter__`/`__exit__`, so `with DataLoader(...)` "
    "raises before the first batch (TypeError: 'DataLoader' object does not support the context "
    "manager protocol; AttributeError: __enter__ before Python 3.11). It is sometimes suggested "
    "as a way to shut the worker processes down; they stop when their iterator is exhausted or "
    "garbage-collected.",
    "Use the loader directly: `loader = DataLoader(...)`, then `for batch in loader:`. To stop "
    "persistent workers early, drop the iterator (`del it`) or the loader.",
};

// A DataLoader(...) call, or a name bound to one earlier in the same scope.
bool is_dataloader(const FileAnalysis& file, NodeId expression, NodeId at) {
  const SyntaxTree& tree = file.tree();
  if (tree.kind(expression) == NodeKind::kCall) return file.is_dataloader_constructor(expression);
  std::string dotted = dotted_text(tree, expression);
  if (dotted.empty()) return false;
  NodeId last = file.last_assignment_before(dotted, at, file.scope_index_of(at));
  NodeId right = last != kNoNode ? tree.child_by_field(last, Field::kRight) : kNoNode;
  return right != kNoNode && tree.kind(right) == NodeKind::kCall &&
         file.is_dataloader_constructor(right);
}

void check(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (tree.kind(id) != NodeKind::kWithItem) continue;
    NodeId value = tree.child_by_field(id, Field::kValue);
    if (value == kNoNode) continue;
    NodeId expression =
        tree.kind(value) == NodeKind::kAsPattern ? tree.first_named_child(value) : value;
    if (expression == kNoNode || !is_dataloader(file, expression, id)) continue;
    RuleReport r;
    r.node = expression;
    r.message = fmt::format(
        "`with {}`: DataLoader is not a context manager, so this statement raises before the "
        "first batch",
        quote(file, expression, 50));
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_dataloader_as_context_manager_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
