// GL203: exceptions, tracebacks or sys.exc_info() kept beyond the handler.
#include <fmt/format.h>

#include <algorithm>

#include "lint/fix_text.h"
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
  NodeId root = file.scopes()[scope].node;
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kRaiseStatement || file.scope_index_of(id) != scope) continue;
    for (NodeId t = id; t < tree.node(id).subtree_end; ++t) {
      if (tree.kind(t) == NodeKind::kIdentifier && tree.text(t) == container) return true;
    }
  }
  return false;
}

bool touches_tensors(const FileAnalysis& file, std::size_t scope);

// `self._error = ex` in one method, `raise self._error` in another (a
// thread's join(), the next call, teardown()): a deferred error, kept to be
// raised, and released when it is.
bool raised_by_the_class(const FileAnalysis& file, const StoreEvent& store) {
  const SyntaxTree& tree = file.tree();
  std::string path = dotted_text(tree, store.container);
  if (path.empty()) path = container_path(file, store.container);
  if (path.empty()) return false;
  NodeId owner = tree.ancestor_of_kind(store.site, {NodeKind::kClassDefinition});
  if (owner == kNoNode) return false;
  auto mentions_path = [&](NodeId root) {
    for (NodeId t = root; t < tree.node(root).subtree_end; ++t) {
      NodeKind k = tree.kind(t);
      if ((k == NodeKind::kAttribute || k == NodeKind::kIdentifier) &&
          dotted_text(tree, t) == path) {
        return true;
      }
    }
    return false;
  };
  // `raise self._error`; or a method other than the storing one that reads
  // the errors and raises (`maybe_raise_errors_on_exit`).
  for (NodeId id = owner; id < tree.node(owner).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kRaiseStatement && mentions_path(id)) return true;
  }
  for (NodeId def = owner; def < tree.node(owner).subtree_end; ++def) {
    if (tree.kind(def) != NodeKind::kFunctionDefinition || def + 1 >= tree.node(def).subtree_end) {
      continue;
    }
    std::size_t s = file.scope_index_of(def + 1);
    const Scope& method = file.scopes()[s];
    if (method.node != def || method.class_node != owner || s == store.scope) continue;
    bool raises = false;
    for (NodeId id = method.node; id < tree.node(method.node).subtree_end && !raises; ++id) {
      raises = tree.kind(id) == NodeKind::kRaiseStatement && file.scope_index_of(id) == s;
    }
    if (raises && mentions_path(method.node)) return true;
  }
  return false;
}

// The handler's `try` body calls nothing, or it catches an ImportError: the
// traceback holds this frame alone (or import machinery), and this function
// handles no tensors.
bool no_tensor_frames(const FileAnalysis& file, const StoreEvent& store) {
  const SyntaxTree& tree = file.tree();
  NodeId handler = tree.ancestor_of_kind(
      store.site, {NodeKind::kExceptClause, NodeKind::kFunctionDefinition, NodeKind::kLambda});
  if (handler == kNoNode || tree.kind(handler) != NodeKind::kExceptClause) return false;
  NodeId statement = tree.parent(handler);
  if (statement == kNoNode || tree.kind(statement) != NodeKind::kTryStatement) return false;
  if (touches_tensors(file, store.scope)) return false;
  std::string_view type;
  for (NodeId c : tree.named_children(handler)) {
    if (tree.kind(c) != NodeKind::kBlock) {
      type = tree.text(c);
      break;
    }
  }
  if (type.find("ImportError") != std::string_view::npos ||
      type.find("ModuleNotFoundError") != std::string_view::npos) {
    return true;
  }
  NodeId body = tree.child_by_field(statement, Field::kBody);
  if (body == kNoNode) return false;
  for (NodeId id = body; id < tree.node(body).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kCall) return false;
  }
  return true;
}

// `report[name] = e` where `report` is what the function that made it
// returns (`return report`): the exceptions are its result, handed over.
bool returned_by_owner(const FileAnalysis& file, const StoreEvent& store) {
  const SyntaxTree& tree = file.tree();
  std::string path = container_path(file, store.container);
  std::string root = path.substr(0, path.find('.'));
  if (root.empty() || root == "self" || root == "cls") return false;
  for (std::size_t s = store.scope;;) {
    const Scope& scope = file.scopes()[s];
    if (scope.assigned.count(root) && !scope.declared_global.count(root)) {
      for (NodeId id = scope.node; id < tree.node(scope.node).subtree_end; ++id) {
        if (tree.kind(id) != NodeKind::kReturnStatement || file.scope_index_of(id) != s) continue;
        NodeId value = tree.first_named_child(id);
        if (value != kNoNode && tree.text(value) == root) return true;
      }
      return false;
    }
    if (s == 0) return false;
    NodeId up = tree.parent(scope.node);
    if (up == kNoNode) return false;
    s = file.scope_index_of(up);
  }
}

bool deleted_in_scope(const FileAnalysis& file, const std::string& name, std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  NodeId root = file.scopes()[scope].node;
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
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

// `e.__traceback__ = None` (or `e = e.with_traceback(None)`) after the store
// in the same function: the kept exception no longer holds the frames.
bool traceback_dropped(const FileAnalysis& file, const StoreEvent& store) {
  const SyntaxTree& tree = file.tree();
  std::string value(file.text(store.value));
  NodeId root = file.scopes()[store.scope].node;
  for (NodeId id = store.site; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kAssignment || file.scope_index_of(id) != store.scope) continue;
    NodeId left = tree.child_by_field(id, Field::kLeft);
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (left == kNoNode || right == kNoNode) continue;
    std::string target = dotted_text(tree, left);
    if (tree.kind(right) == NodeKind::kNone && target.size() > 14 &&
        target.substr(target.size() - 14) == ".__traceback__") {
      std::string owner = target.substr(0, target.size() - 14);
      if (owner == value || owner == dotted_text(tree, store.container)) return true;
    }
  }
  return false;
}

// The function, or the code its try block runs, handles tensors: only then
// do the frames a traceback keeps hold GPU memory.
bool touches_tensors(const FileAnalysis& file, std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  const Scope& s = file.scopes()[scope];
  if (s.class_node != kNoNode) {
    const ClassFacts* c = file.class_facts(s.class_node);
    if (c != nullptr && c->is_module) return true;
  }
  for (NodeId id = s.node; id < tree.node(s.node).subtree_end; ++id) {
    if (file.scope_index_of(id) != scope) continue;
    if (file.value_bits(id) & (kCarriesGraph | kDeviceTensor)) return true;
    if (tree.kind(id) == NodeKind::kCall && file.is_model_call(id)) return true;
  }
  return false;
}

bool is_memory_error_handler(const FileAnalysis& file, NodeId handler) {
  const SyntaxTree& tree = file.tree();
  NodeId type = tree.child_by_field(handler, Field::kValue);
  if (type == kNoNode) {
    for (NodeId c : tree.named_children(handler)) {
      if (tree.kind(c) != NodeKind::kBlock) type = c;
      break;
    }
  }
  std::string_view text =
      type == kNoNode || tree.kind(type) == NodeKind::kBlock ? std::string_view() : tree.text(type);
  if (text.find("RuntimeError") != std::string_view::npos ||
      text.find("MemoryError") != std::string_view::npos) {
    return true;  // torch's out-of-memory error is a RuntimeError (the FAQ's handler)
  }
  // A bare `except:` or `except Exception:` catches everything: it is an
  // out-of-memory handler only when it says so (`'out of memory' in
  // str(e)`, fairseq's trainer, or `torch.cuda.empty_cache()`). Otherwise a
  // call in it is a fallback to other work (diffusers' checkpoint hooks
  // trying another text-encoder class), not a retry of the failed step.
  if (!text.empty() && text.find("Exception") == std::string_view::npos) return false;
  std::string_view body = tree.text(handler);
  for (std::string_view word : {"memory", "oom", "OOM", "empty_cache"}) {
    if (body.find(word) != std::string_view::npos) return true;
  }
  return false;
}

std::string text_instead(const FileAnalysis& file, NodeId value) {
  std::string v = whole_code(file, value, 40);
  if (v.empty() || file.tree().kind(value) != NodeKind::kIdentifier) {
    return "keep text instead (`repr(e)`, `traceback.format_exc()`), or drop the frames first "
           "(`e.with_traceback(None)`)";
  }
  return fmt::format("store `repr({})` or `{}.with_traceback(None)` instead", v, v);
}

// try: run(batch) / except RuntimeError: run(smaller): the retry runs
// while the exception, and the frames of the attempt that ran out of
// memory, are still alive (the PyTorch FAQ's out-of-memory handler).
void check_retries_inside_handlers(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = 0; id < tree.size(); ++id) {
    if (tree.kind(id) != NodeKind::kTryStatement) continue;
    NodeId body = tree.child_by_field(id, Field::kBody);
    if (body == kNoNode) continue;
    std::size_t scope = file.scope_index_of(id);
    std::vector<std::string_view> attempted;
    for (NodeId c = body; c < tree.node(body).subtree_end; ++c) {
      if (tree.kind(c) == NodeKind::kCall && file.scope_index_of(c) == scope) {
        std::string_view n = file.callee_last_name(c);
        if (!n.empty()) attempted.push_back(n);
      }
    }
    for (NodeId h : tree.named_children(id)) {
      if (tree.kind(h) != NodeKind::kExceptClause || !is_memory_error_handler(file, h)) continue;
      for (NodeId c = h; c < tree.node(h).subtree_end; ++c) {
        if (tree.kind(c) != NodeKind::kCall || file.scope_index_of(c) != scope) continue;
        std::string_view n = file.callee_last_name(c);
        if (n.empty() || std::find(attempted.begin(), attempted.end(), n) == attempted.end()) {
          continue;
        }
        bool allocates = file.is_model_call(c);
        for (std::size_t s : file.callees_of(c)) allocates |= touches_tensors(file, s);
        if (!allocates) continue;
        RuleReport r;
        r.node = c;
        r.message = fmt::format(
            "`{}` retries inside the `except` block: until the handler ends, the exception's "
            "traceback keeps the frames of the failed attempt, and every tensor they hold, "
            "alive",
            quote(file, c));
        r.fix =
            "leave the handler first: set a flag in it (`failed = True`) and retry after the "
            "`try` statement";
        sink.report(kInfo, std::move(r));
        break;
      }
    }
  }
}

void check(const FileAnalysis& file, FindingSink& sink) {
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
        if (!touches_tensors(file, store.scope)) continue;  // no tensors in those frames
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
        if (traceback_dropped(file, store)) continue;
        if (raised_by_the_class(file, store) || no_tensor_frames(file, store)) continue;
        r.message = fmt::format(
            "`{}` keeps `{}` after its handler: its traceback holds the frames of the failed "
            "step and every CUDA tensor they reference",
            quote(file, store.site), value);
        r.fix = text_instead(file, store.value);
        break;
      default: {
        std::string container = container_path(file, store.container);
        if (!container.empty() && raised_later(file, container, store.scope)) continue;
        if (traceback_dropped(file, store)) continue;
        if (raised_by_the_class(file, store) || no_tensor_frames(file, store)) continue;
        if (returned_by_owner(file, store) &&
            !any_step_loop(file, file.innermost_loop(store.site), 8)) {
          continue;
        }
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
        r.fix = text_instead(file, store.value);
        break;
      }
    }
    sink.report(kInfo, std::move(r));
  }
  check_retries_inside_handlers(file, sink);
}

}  // namespace

std::unique_ptr<Rule> make_exception_kept_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
