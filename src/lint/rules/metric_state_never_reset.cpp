// GL206: a torchmetrics metric whose states are lists (AUROC, average
// precision, mean average precision, retrieval metrics, CatMetric) is kept
// in an attribute, updated on every call, and never reset anywhere in the
// file: its lists keep every batch's predictions and targets for the run.
#include <fmt/format.h>

#include <algorithm>

#include "lint/rules/rule_factories.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL206",
    "metric-state-never-reset",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "A torchmetrics metric with list states is updated every step and never reset.",
    "Metrics such as AUROC, AveragePrecision, MeanAveragePrecision, the Retrieval* metrics and "
    "CatMetric cannot summarise a batch into a running sum: `update()` appends the batch's "
    "predictions and targets to lists, on the device they came from, until `reset()` empties "
    "them. Lightning resets a metric it logs as an object (`self.log(name, metric)`); a metric "
    "only computed by hand, or kept inside another object whose own `reset()` forgets it, grows "
    "with every batch of every epoch.",
    "Call `metric.reset()` after `compute()` (at each epoch end), forward a wrapper's `reset()` to "
    "the metric it holds, or log the metric object so Lightning resets it.",
};

// torchmetrics classes whose states are lists of every update's inputs.
bool keeps_list_states(std::string_view qualified) {
  if (qualified.rfind("torchmetrics.", 0) != 0) return false;
  std::string_view last = vocabulary::last_component(qualified);
  for (std::string_view part :
       {"AUROC", "ROC", "AveragePrecision", "PrecisionRecallCurve", "Retrieval", "CatMetric",
        "SpearmanCorrCoef", "KendallRankCorrCoef"}) {
    if (last.find(part) != std::string_view::npos) return true;
  }
  return false;
}

// `x.reset()` on the attribute anywhere in the file, a rebinding outside
// __init__, or the metric object handed to Lightning's log / log_dict.
bool reset_somewhere(const FileAnalysis& file, const std::string& path) {
  const SyntaxTree& tree = file.tree();
  std::string_view attribute = vocabulary::last_component(path);
  // `self.metric.reset()`, `wrapper.metric.reset()`; not `metric.reset()` on
  // a local of that name (a loop over the wrappers resets the wrappers).
  for (NodeId call : file.calls_named("reset")) {
    NodeId receiver = file.method_receiver(call);
    std::string reset = receiver != kNoNode ? dotted_text(tree, receiver) : std::string();
    if (reset.find('.') != std::string::npos && vocabulary::last_component(reset) == attribute) {
      return true;
    }
  }
  for (NodeId id : file.assignments_to(path)) {
    if (file.scope_of(id).name != "__init__") return true;
  }
  for (std::string_view log : {"log", "log_dict"}) {
    for (NodeId call : file.calls_named(log)) {
      NodeId args = tree.child_by_field(call, Field::kArguments);
      if (args == kNoNode) continue;
      for (NodeId a : tree.named_children(args)) {
        NodeId value =
            tree.kind(a) == NodeKind::kKeywordArgument ? tree.child_by_field(a, Field::kValue) : a;
        if (value != kNoNode && dotted_text(tree, value) == path) return true;
      }
    }
  }
  // `for metric in (self.auroc, self.ap): metric.reset()`: reset through a
  // loop over a collection that names it.
  for (NodeId call : file.calls_named("reset")) {
    NodeId receiver = file.method_receiver(call);
    if (receiver == kNoNode || tree.kind(receiver) != NodeKind::kIdentifier) continue;
    NodeId loop = file.innermost_loop(call);
    if (loop == kNoNode || tree.kind(loop) != NodeKind::kForStatement) continue;
    NodeId iterable = file.loop_iterable(loop);
    std::vector<std::string> names = file.loop_variables(loop);
    bool over_it = std::find(names.begin(), names.end(), tree.text(receiver)) != names.end();
    if (over_it && iterable != kNoNode &&
        tree.text(iterable).find(path) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

// `auroc = AUROC(task="binary").cuda()` before the epoch loop, then
// `auroc.update(preds, y)` in the batch loop inside it and never
// `auroc.reset()` in that function: every epoch's predictions and targets
// stay in the lists. A metric made inside the epoch loop, or one filled by
// a single pass (one loop: the function's result), holds one epoch.
void check_local_metric(const FileAnalysis& file, NodeId call, const std::string& name,
                        FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  std::size_t scope = file.scope_index_of(call);
  NodeId binding = kNoNode;
  for (NodeId id : file.assignments_to(name)) {
    if (file.scope_index_of(id) != scope) continue;
    if (binding != kNoNode) return;  // bound twice: which one is updated is unknown
    binding = id;
  }
  if (binding == kNoNode || binding > call) return;
  NodeId right = tree.child_by_field(binding, Field::kRight);
  // Through `.to(device)` / `.cuda()`, which return the metric.
  while (right != kNoNode && tree.kind(right) == NodeKind::kCall &&
         (file.callee_last_name(right) == "to" || file.callee_last_name(right) == "cuda") &&
         file.method_receiver(right) != kNoNode) {
    right = file.method_receiver(right);
  }
  if (right == kNoNode || tree.kind(right) != NodeKind::kCall) return;
  std::string metric = file.qualified_name(file.callee(right));
  if (!keeps_list_states(metric)) return;
  int loops_outlived = 0;
  for (NodeId l = file.innermost_loop(call); l != kNoNode; l = file.outer_loop(l)) {
    if (tree.contains(l, binding)) break;
    ++loops_outlived;
  }
  if (loops_outlived < 2) return;
  for (NodeId reset : file.calls_named("reset")) {
    NodeId receiver = file.method_receiver(reset);
    if (receiver != kNoNode && file.scope_index_of(reset) == scope &&
        tree.kind(receiver) == NodeKind::kIdentifier && tree.text(receiver) == name) {
      return;
    }
  }
  RuleReport r;
  r.node = call;
  r.message = fmt::format(
      "`{}` adds to the list states of `{}`, made once before the loops around it, and "
      "nothing here resets `{}`: every batch's predictions and targets of every pass stay in it",
      quote(file, call, 60), metric, name);
  r.fix = fmt::format("call `{}.reset()` once its value is computed (each epoch end)", name);
  sink.report(kInfo, std::move(r));
}

// What the callers of the function `scope` pass for its parameter `name`
// (by keyword or position): calls of the function; for an __init__, the
// constructions of its class and `super().__init__(...)` in subclasses.
std::vector<NodeId> arguments_for(const FileAnalysis& file, std::size_t scope,
                                  std::string_view name) {
  std::vector<NodeId> out;
  if (scope == 0) return out;
  const SyntaxTree& tree = file.tree();
  const Scope& s = file.scopes()[scope];
  auto at = std::find(s.parameters.begin(), s.parameters.end(), name);
  if (at == s.parameters.end()) return out;
  std::size_t index = static_cast<std::size_t>(at - s.parameters.begin());
  bool method = !s.parameters.empty() && s.parameters[0] == "self";
  std::vector<NodeId> calls;
  if (s.name == "__init__" && s.class_node != kNoNode) {
    const ClassFacts* c = file.class_facts(s.class_node);
    if (c == nullptr) return out;
    for (NodeId call : file.calls_named(c->name)) calls.push_back(call);
    for (NodeId call : file.calls_named("__init__")) {
      NodeId receiver = file.method_receiver(call);
      if (receiver == kNoNode || tree.text(receiver).rfind("super(", 0) != 0) continue;
      const Scope& from = file.scope_of(call);
      const ClassFacts* sub =
          from.class_node != kNoNode ? file.class_facts(from.class_node) : nullptr;
      if (sub == nullptr) continue;
      for (const std::string& base : sub->bases) {
        if (vocabulary::last_component(base) == c->name) calls.push_back(call);
      }
    }
  } else {
    for (NodeId call : file.calls_named(s.name)) calls.push_back(call);
  }
  for (NodeId call : calls) {
    NodeId by_keyword = file.keyword_argument(call, name);
    if (by_keyword != kNoNode) {
      out.push_back(by_keyword);
      continue;
    }
    std::vector<NodeId> args = file.positional_arguments(call);
    std::size_t position = method ? index - 1 : index;
    if (method && index == 0) continue;
    if (position < args.size() && tree.kind(args[position]) != NodeKind::kListSplat &&
        tree.kind(args[position]) != NodeKind::kDictionarySplat) {
      out.push_back(args[position]);
    }
  }
  return out;
}

// A class object handed on through a parameter (`metric_class=metric_class`).
std::string class_passed(const FileAnalysis& file, NodeId value, int depth, NodeId* via) {
  const SyntaxTree& tree = file.tree();
  if (value == kNoNode || depth > 3 || tree.kind(value) != NodeKind::kIdentifier) return {};
  for (NodeId passed : arguments_for(file, file.scope_index_of(value), tree.text(value))) {
    std::string q = file.qualified_name(passed);
    if (keeps_list_states(q)) {
      *via = passed;
      return q;
    }
    q = class_passed(file, passed, depth + 1, via);
    if (!q.empty()) return q;
  }
  return {};
}

// The list-state metric class `value` makes: `RetrievalMAP()`; a parameter
// filled by every caller with one (`super().__init__(metric_func=
// metric_func)` in a subclass); `metric_class(**params)` where the class
// itself is a parameter that callers fill (`metric_class=RetrievalFallOut`,
// torchok#166). Up to three calls away; "" when none.
std::string metric_made_by(const FileAnalysis& file, NodeId value, int depth, NodeId* via) {
  const SyntaxTree& tree = file.tree();
  if (value == kNoNode || depth > 3) return {};
  std::size_t scope = file.scope_index_of(value);
  if (tree.kind(value) == NodeKind::kCall) {
    NodeId callee = file.callee(value);
    std::string q = file.qualified_name(callee);
    if (keeps_list_states(q)) return q;
    if (callee != kNoNode && tree.kind(callee) == NodeKind::kIdentifier) {
      for (NodeId passed : arguments_for(file, scope, tree.text(callee))) {
        std::string cls = file.qualified_name(passed);
        if (keeps_list_states(cls)) {
          *via = passed;
          return cls;
        }
        std::string deeper = class_passed(file, passed, depth + 1, via);
        if (!deeper.empty()) return deeper;
      }
    }
    return {};
  }
  if (tree.kind(value) != NodeKind::kIdentifier) return {};
  std::string_view name = tree.text(value);
  NodeId bound = file.last_assignment_before(name, value, scope);
  if (bound != kNoNode)
    return metric_made_by(file, tree.child_by_field(bound, Field::kRight), depth + 1, via);
  for (NodeId passed : arguments_for(file, scope, name)) {
    std::string q = metric_made_by(file, passed, depth + 1, via);
    if (!q.empty()) return q;
  }
  return {};
}

// The list-state torchmetrics class assigned to `path` in a method of
// `owner`, or "".
std::string constructed_metric(const FileAnalysis& file, const std::string& path, NodeId owner,
                               NodeId* via) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id : file.assignments_to(path)) {
    if (file.scope_of(id).class_node != owner) continue;
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (right == kNoNode) continue;
    std::string q = metric_made_by(file, right, 0, via);
    if (!q.empty()) return q;
  }
  return {};
}

void check(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId call : file.calls()) {
    // `self.metric.update(...)` or `self.metric(...)` in a method.
    NodeId fn = file.callee(call);
    std::string_view method = file.callee_last_name(call);
    NodeId holder = kNoNode;
    if (method == "update" || method == "forward") {
      holder = file.method_receiver(call);
    } else if (fn != kNoNode && tree.kind(fn) == NodeKind::kAttribute) {
      holder = fn;
    }
    if (holder == kNoNode && fn != kNoNode && tree.kind(fn) == NodeKind::kIdentifier) {
      holder = fn;  // `auroc(preds, target)`
    }
    if (holder == kNoNode) continue;
    std::string path = dotted_text(tree, holder);
    if (tree.kind(holder) == NodeKind::kIdentifier) {
      check_local_metric(file, call, path, sink);
      continue;
    }
    if (path.rfind("self.", 0) != 0) continue;
    const Scope& scope = file.scope_of(call);
    if (scope.class_node == kNoNode || scope.name == "__init__") continue;
    NodeId via = kNoNode;
    std::string metric = constructed_metric(file, path, scope.class_node, &via);
    if (metric.empty() || reset_somewhere(file, path)) continue;
    // How the class reaches the attribute when a caller hands it in.
    std::string reaches;
    if (via != kNoNode) {
      NodeId shown = tree.parent(via);
      if (shown == kNoNode || tree.kind(shown) != NodeKind::kKeywordArgument) shown = via;
      reaches = fmt::format(" (handed in as `{}` at line {})", quote(file, shown, 50),
                            tree.start_point(via).row + 1);
    }
    RuleReport r;
    r.node = call;
    r.message = fmt::format(
        "`{}` adds to the list states of `{}`{} kept in `{}`, and nothing in this file resets "
        "`{}`: every batch's predictions and targets stay in it for the whole run",
        quote(file, call, 60), metric, reaches, path, path);
    r.fix = fmt::format("call `{}.reset()` once its value is computed (each epoch end)", path);
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_metric_state_never_reset_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
