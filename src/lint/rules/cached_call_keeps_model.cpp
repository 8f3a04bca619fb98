// GL205: functools.lru_cache (or cache) whose key holds a model: on a method
// of an nn.Module (`self` is in every key), or on a function that takes the
// model as an argument. The cache belongs to the function, which lives as
// long as the process, so every model it has seen stays referenced.
#include <fmt/format.h>

#include <algorithm>

#include "lint/rules/rule_factories.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL205",
    "cached-call-keeps-model",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "A functools cache keeps the models it was called with.",
    "`functools.lru_cache` and `functools.cache` keep each call's arguments as the key of an "
    "entry in a cache that belongs to the function, not to the object. On a method, `self` is "
    "one of those arguments; on a helper that takes the model, the model is. The cache therefore "
    "keeps every model (with its parameters, buffers and optimizer-visible tensors on the GPU) "
    "that it has seen, up to `maxsize` entries or without limit, after `del model` and "
    "`gc.collect()`: sweeps, cross-validation folds and reloads start each model on top of the "
    "previous ones.",
    "Cache on the instance instead (compute the value once in `__init__`, or keep a dict on "
    "`self`), key a module-level cached function by the sizes and device only, or call "
    "`fn.cache_clear()` when a model is dropped.",
};

// `lru_cache`, `functools.cache`, a project's own `method_lru_cache(...)`;
// not `cached_property` (stored on the instance).
bool is_cache_decorator(const FileAnalysis& file, NodeId decorator, NodeId& call) {
  NodeId e = file.tree().first_named_child(decorator);
  call = kNoNode;
  if (e != kNoNode && file.tree().kind(e) == NodeKind::kCall) {
    call = e;
    e = file.callee(e);
  }
  std::string q = file.qualified_name(e);
  std::string_view last = vocabulary::last_component(q);
  return last == "cache" || last == "lru_cache" || last.ends_with("_lru_cache");
}

// maxsize=1 keeps only the newest entry, released by the next call: not
// reported. Unknown or larger sizes (the default is 128; None is unbounded) are.
bool keeps_one_entry(const FileAnalysis& file, NodeId call) {
  if (call == kNoNode) return false;
  NodeId size = file.keyword_argument(call, "maxsize");
  if (size == kNoNode) {
    std::vector<NodeId> args = file.positional_arguments(call);
    if (!args.empty()) size = args.front();
  }
  if (size == kNoNode || file.tree().kind(size) != NodeKind::kInteger) return false;
  std::string_view text = file.text(size);
  return text == "0" || text == "1";
}

bool has_decorator_named(const FileAnalysis& file, const Scope& scope, std::string_view name) {
  for (NodeId d : file.tree().named_children(scope.definition)) {
    if (file.tree().kind(d) == NodeKind::kDecorator &&
        file.text(d).find(name) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

// A parameter that holds a model: annotated `nn.Module`, or named like one
// (`model`, `net`, `backbone`).
std::string model_parameter(const FileAnalysis& file, const Scope& scope) {
  const SyntaxTree& tree = file.tree();
  NodeId params = tree.child_by_field(scope.node, Field::kParametersField);
  if (params == kNoNode) return {};
  for (NodeId p : tree.named_children(params)) {
    NodeKind k = tree.kind(p);
    NodeId name = p;
    bool typed = false;
    if (k == NodeKind::kTypedParameter) {
      name = tree.first_named_child(p);
      typed = true;
    } else if (k == NodeKind::kTypedDefaultParameter || k == NodeKind::kDefaultParameter) {
      name = tree.child_by_field(p, Field::kName);
      typed = k == NodeKind::kTypedDefaultParameter;
    }
    if (name == kNoNode || tree.kind(name) != NodeKind::kIdentifier) continue;
    std::string_view n = tree.text(name);
    if (n == "self" || n == "cls") continue;
    // `model: nn.Module`, `net: Optional["torch.nn.Module"] = None` (the annotation follows
    // the name); not `gm: GraphModule` or other classes whose names end in Module.
    std::string_view annotation = typed ? file.text(p).substr(n.size()) : std::string_view();
    bool typed_module = annotation.find("nn.Module") != std::string_view::npos ||
                        annotation.starts_with(": Module");
    if (typed_module || vocabulary::is_model_name(n)) return std::string(n);
  }
  return {};
}

// The `del` statement of the file that deletes a name every binding of
// which constructs the class of `scope`, a method called on that
// instance; kNoNode if none.
NodeId deleted_instance(const FileAnalysis& file, const Scope& scope) {
  if (scope.class_node == kNoNode || scope.parameters.empty() ||
      scope.parameters.front() != "self" || has_decorator_named(file, scope, "staticmethod") ||
      has_decorator_named(file, scope, "classmethod")) {
    return kNoNode;
  }
  const ClassFacts* owner = file.class_facts(scope.class_node);
  if (owner == nullptr) return kNoNode;
  const SyntaxTree& tree = file.tree();
  for (NodeId statement : file.delete_statements()) {
    std::vector<NodeId> targets = tree.named_children(statement);
    if (targets.size() == 1 && tree.kind(targets[0]) == NodeKind::kExpressionList) {
      targets = tree.named_children(targets[0]);
    }
    for (NodeId target : targets) {
      if (tree.kind(target) != NodeKind::kIdentifier) continue;
      std::vector<std::string> classes = file.constructed_classes(target);
      if (classes.empty() || std::any_of(classes.begin(), classes.end(),
                                         [&](const std::string& c) { return c != owner->name; })) {
        continue;
      }
      return statement;
    }
  }
  return kNoNode;
}

// "`self`, the `Net` instance," for a method of an nn.Module, "`model`" for a
// parameter that holds one; empty when the key holds no model.
std::string what_the_key_keeps(const FileAnalysis& file, const Scope& scope) {
  if (scope.class_node != kNoNode) {
    if (has_decorator_named(file, scope, "staticmethod") ||
        has_decorator_named(file, scope, "classmethod")) {
      std::string p = model_parameter(file, scope);
      return p.empty() ? std::string() : fmt::format("`{}`", p);
    }
    const ClassFacts* owner = file.class_facts(scope.class_node);
    if (owner != nullptr && owner->is_module && !scope.parameters.empty() &&
        scope.parameters.front() == "self") {
      return fmt::format("`self`, the `{}` instance,", owner->name);
    }
  }
  std::string p = model_parameter(file, scope);
  return p.empty() ? std::string() : fmt::format("`{}`", p);
}

void check(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (const Scope& scope : file.scopes()) {
    if (scope.definition == scope.node || tree.kind(scope.node) != NodeKind::kFunctionDefinition) {
      continue;  // not decorated
    }
    for (NodeId d : tree.named_children(scope.definition)) {
      NodeId call = kNoNode;
      if (tree.kind(d) != NodeKind::kDecorator || !is_cache_decorator(file, d, call)) continue;
      std::string kept = what_the_key_keeps(file, scope);
      // `del world` of an instance whose method is cached: the author frees
      // it, the cache still holds it (even one entry, until a next call
      // that may never come). ParlAI's DynamicBatchWorld kept the training
      // model past `del world, agent`.
      NodeId freed = kNoNode;
      if (kept.empty() || keeps_one_entry(file, call)) {
        freed = deleted_instance(file, scope);
        if (freed == kNoNode) continue;
        const ClassFacts* owner = file.class_facts(scope.class_node);
        RuleReport r;
        r.node = d;
        r.message = fmt::format(
            "`@{}` caches `{}` with `self` in its key: `{}` at line {} frees the `{}` "
            "instance, but the cache keeps it, with everything it holds (a model on the GPU), "
            "until the cache is cleared or, with one entry, until a next call",
            file.text(tree.first_named_child(d)), scope.name, file.text(freed),
            tree.start_point(freed).row + 1, owner != nullptr ? owner->name : "");
        r.fix = fmt::format(
            "compute it once per instance (in `__init__`, or a dict on `self`), or call "
            "`{}.{}.cache_clear()` before the `del`",
            owner != nullptr ? owner->name : "", scope.name);
        sink.report(kInfo, std::move(r));
        break;
      }
      RuleReport r;
      r.node = d;
      r.message = fmt::format(
          "`@{}` caches `{}` with {} in every key: the cache lives as long as the process and "
          "keeps every {} it was called with, with its parameters on the GPU, after `del`",
          file.text(tree.first_named_child(d)), scope.name, kept,
          scope.class_node != kNoNode ? "instance" : "model");
      r.fix = scope.class_node != kNoNode
                  ? fmt::format(
                        "compute it once per instance (in `__init__`, or a dict on `self`), or "
                        "move `{}` to a module-level function of the sizes and device only",
                        scope.name)
                  : fmt::format(
                        "drop the cache, or call `{}.cache_clear()` when a model is "
                        "dropped",
                        scope.name);
      sink.report(kInfo, std::move(r));
      break;
    }
  }
}

}  // namespace

std::unique_ptr<Rule> make_cached_call_keeps_model_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
