// GL402: a child process that is not joined or terminated when the parent
// fails between starting it and waiting for it.
#include <fmt/format.h>

#include <algorithm>

#include "lint/process_start.h"
#include "lint/rules/rule_factories.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL402",
    "process-not-joined-on-failure",
    Severity::kWarning,
    Cause::kContextsLeftBehind,
    "A child process is started without a join/terminate that runs when the parent fails.",
    "If an exception ends the parent between starting a child and joining it, the child keeps "
    "running: a non-daemon child is waited for at interpreter exit (the parent hangs), and if the "
    "parent is killed the child is orphaned. A child that uses the GPU keeps its CUDA context, "
    "hundreds of MiB of device memory, for as long as it lives, after the job that owned it is "
    "gone.",
    "Put the code after `p.start()` in a `try:` and join or terminate in its `finally:` "
    "(`p.terminate()`, `p.join()`), use `with Pool(...) as pool:` / "
    "`with ProcessPoolExecutor() as ex:`, or `torch.multiprocessing.spawn(...)`, which joins the "
    "workers and raises if one fails.",
};

bool is_cleanup_method(std::string_view m) {
  return m == "join" || m == "terminate" || m == "kill" || m == "close" || m == "wait" ||
         m == "shutdown" || m == "communicate" || m == "send_signal";
}

// What names reach the process object: `p = Process(...)`, `procs.append(Process(...))`,
// `procs = [Process(...) for ...]`, `pool = Pool(...)`.
std::vector<std::string> holders_of(const FileAnalysis& file, NodeId call) {
  const SyntaxTree& tree = file.tree();
  std::vector<std::string> out;
  for (NodeId p = tree.parent(call), child = call; p != kNoNode; child = p, p = tree.parent(p)) {
    NodeKind k = tree.kind(p);
    if (k == NodeKind::kAssignment && tree.node(child).field == Field::kRight) {
      std::string d = dotted_text(tree, tree.child_by_field(p, Field::kLeft));
      if (!d.empty()) out.push_back(d);
      break;
    }
    if (k == NodeKind::kArgumentList) {
      NodeId owner = tree.parent(p);
      if (owner != kNoNode && tree.kind(owner) == NodeKind::kCall &&
          file.callee_last_name(owner) == "append") {
        std::string d = dotted_text(tree, file.method_receiver(owner));
        if (!d.empty()) out.push_back(d);
      }
      break;
    }
    if (k == NodeKind::kExpressionStatement || k == NodeKind::kBlock) break;
  }
  return out;
}

bool mentions_any(const SyntaxTree& tree, NodeId root, const std::vector<std::string>& names) {
  if (root == kNoNode) return false;
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    NodeKind k = tree.kind(id);
    if (k != NodeKind::kIdentifier && k != NodeKind::kAttribute) continue;
    std::string d = dotted_text(tree, id);
    if (std::find(names.begin(), names.end(), d) != names.end()) return true;
  }
  return false;
}

// A cleanup call (join/terminate/...) on a holder, or on the variable of a
// loop over a holder, inside `region`.
bool cleans_up(const FileAnalysis& file, NodeId region, const std::vector<std::string>& names) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = region; id < tree.node(region).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kCall || !is_cleanup_method(file.callee_last_name(id))) continue;
    NodeId receiver = file.method_receiver(id);
    if (receiver == kNoNode) continue;
    std::vector<std::string> reach = names;
    for (NodeId p = tree.parent(id); p != kNoNode; p = tree.parent(p)) {
      if (tree.kind(p) == NodeKind::kForStatement &&
          mentions_any(tree, tree.child_by_field(p, Field::kRight), names)) {
        for (const auto& v : file.loop_variables(p)) reach.push_back(v);
      }
      if (p == region) break;
    }
    if (mentions_any(tree, receiver, reach)) return true;
  }
  return false;
}

bool is_collecting_method(std::string_view m) {
  return m == "append" || m == "extend" || m == "insert" || m == "add" || m == "appendleft";
}

// The statement returns the process or passes it to a call: whoever gets
// it is responsible for joining it. Putting it in a list is not handing it over.
bool hands_over(const FileAnalysis& file, NodeId statement, const std::vector<std::string>& names) {
  const SyntaxTree& tree = file.tree();
  if (tree.kind(statement) == NodeKind::kReturnStatement)
    return mentions_any(tree, statement, names);
  for (NodeId id = statement; id < tree.node(statement).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kCall || is_collecting_method(file.callee_last_name(id)))
      continue;
    NodeId args = tree.child_by_field(id, Field::kArguments);
    if (args != kNoNode && mentions_any(tree, args, names)) return true;
  }
  return false;
}

// `failed = False`, `results = []`, `pass`: nothing there can raise.
bool cannot_raise(const SyntaxTree& tree, NodeId statement) {
  if (tree.type_name(statement) == "pass_statement") return true;
  if (tree.kind(statement) != NodeKind::kExpressionStatement) return false;
  NodeId a = tree.first_named_child(statement);
  if (a == kNoNode || tree.kind(a) != NodeKind::kAssignment) return false;
  NodeId left = tree.child_by_field(a, Field::kLeft);
  NodeId right = tree.child_by_field(a, Field::kRight);
  if (left == kNoNode || right == kNoNode || tree.kind(left) != NodeKind::kIdentifier) return false;
  switch (tree.kind(right)) {
    case NodeKind::kTrue:
    case NodeKind::kFalse:
    case NodeKind::kNone:
    case NodeKind::kInteger:
    case NodeKind::kFloat:
    case NodeKind::kString:
      return true;
    case NodeKind::kList:
    case NodeKind::kDictionary:
    case NodeKind::kTuple:
      return tree.named_children(right).empty();
    default:
      return false;
  }
}

// `for p in procs: failed |= wait_for_process(p)`: each process is handed
// to a call that waits for it.
bool waits_for_each(const FileAnalysis& file, NodeId statement,
                    const std::vector<std::string>& names) {
  const SyntaxTree& tree = file.tree();
  if (tree.kind(statement) != NodeKind::kForStatement ||
      !mentions_any(tree, tree.child_by_field(statement, Field::kRight), names)) {
    return false;
  }
  std::vector<std::string> each = file.loop_variables(statement);
  if (each.empty()) return false;
  NodeId body = tree.child_by_field(statement, Field::kBody);
  return body != kNoNode && hands_over(file, body, each);
}

// `_launch_process_observer(self.procs)` somewhere in the class: the list of
// children is handed to code that watches and terminates them.
bool handed_over_by_class(const FileAnalysis& file, NodeId class_node,
                          const std::vector<std::string>& names) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = class_node; id < tree.node(class_node).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kCall) continue;
    std::string_view callee = file.callee_last_name(id);
    if (is_collecting_method(callee) || callee == "len" || callee == "print" ||
        callee == "isinstance" || callee == "str" || callee == "repr" || callee == "list" ||
        callee == "tuple" || callee == "sorted" || callee == "any" || callee == "all" ||
        callee == "enumerate" || callee == "zip" || callee == "iter" || callee == "bool" ||
        callee == "id" || callee == "type" || callee == "set" || callee == "format" ||
        callee == "join" || callee.empty()) {
      continue;
    }
    for (NodeId a : file.positional_arguments(id)) {
      std::string d = dotted_text(tree, a);
      if (d.rfind("self.", 0) == 0 && std::find(names.begin(), names.end(), d) != names.end()) {
        return true;
      }
    }
  }
  return false;
}

// A `return` of this scope hands one of `names` back to the caller.
bool returned_by_scope(const FileAnalysis& file, std::size_t scope,
                       const std::vector<std::string>& names) {
  const SyntaxTree& tree = file.tree();
  NodeId root = file.scopes()[scope].node;
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kReturnStatement && file.scope_index_of(id) == scope &&
        mentions_any(tree, id, names)) {
      return true;
    }
  }
  return false;
}

// `self.executor = self.make_executor()` in the class: the attributes that
// keep what the method `method` returns.
std::vector<std::string> attributes_keeping_result_of(const FileAnalysis& file, NodeId class_node,
                                                      const std::string& method) {
  const SyntaxTree& tree = file.tree();
  std::vector<std::string> out;
  const std::string callee = "self." + method;
  for (NodeId id = class_node; id < tree.node(class_node).subtree_end; ++id) {
    if (tree.kind(id) != NodeKind::kAssignment) continue;
    NodeId right = tree.child_by_field(id, Field::kRight);
    if (right == kNoNode || tree.kind(right) != NodeKind::kCall ||
        dotted_text(tree, file.callee(right)) != callee) {
      continue;
    }
    std::string left = dotted_text(tree, tree.child_by_field(id, Field::kLeft));
    if (left.rfind("self.", 0) == 0) out.push_back(left);
  }
  return out;
}

NodeId statement_of(const SyntaxTree& tree, NodeId node) {
  NodeId child = node;
  for (NodeId p = tree.parent(node); p != kNoNode; child = p, p = tree.parent(p)) {
    NodeKind k = tree.kind(p);
    if (k == NodeKind::kBlock || k == NodeKind::kModule) return child;
  }
  return node;
}

void check(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  for (NodeId call : file.calls()) {
    ProcessStart kind = process_start_kind(file, call);
    if (kind == ProcessStart::kNone || kind == ProcessStart::kFork) continue;
    if (tree.ancestor_of_kind(call, {NodeKind::kWithItem}) != kNoNode) continue;
    NodeId daemon = file.keyword_argument(call, "daemon");
    if (daemon != kNoNode && tree.kind(daemon) == NodeKind::kTrue) continue;
    // `return Popen(...)`: the caller owns it.
    if (tree.kind(statement_of(tree, call)) == NodeKind::kReturnStatement) continue;
    std::vector<std::string> names = holders_of(file, call);
    std::size_t scope = file.scope_index_of(call);
    const Scope& s = file.scopes()[scope];
    // `procs.append(p)`: the list reaches the process too.
    for (NodeId other : file.calls()) {
      if (file.scope_index_of(other) != scope ||
          !is_collecting_method(file.callee_last_name(other))) {
        continue;
      }
      NodeId args = tree.child_by_field(other, Field::kArguments);
      std::string holder = dotted_text(tree, file.method_receiver(other));
      if (args != kNoNode && !holder.empty() && mentions_any(tree, args, names) &&
          std::find(names.begin(), names.end(), holder) == names.end()) {
        names.push_back(holder);
      }
    }
    NodeId scope_root = s.node;
    bool safe = false;
    for (NodeId id = scope_root; id < tree.node(scope_root).subtree_end && !safe; ++id) {
      if (file.scope_index_of(id) != scope) continue;
      NodeKind k = tree.kind(id);
      if (k == NodeKind::kFinallyClause || k == NodeKind::kExceptClause) {
        safe = cleans_up(file, id, names);
      } else if (k == NodeKind::kAssignment) {
        // p.daemon = True
        NodeId left = tree.child_by_field(id, Field::kLeft);
        NodeId right = tree.child_by_field(id, Field::kRight);
        std::string d = dotted_text(tree, left);
        safe = right != kNoNode && tree.kind(right) == NodeKind::kTrue && d.size() > 7 &&
               d.substr(d.size() - 7) == ".daemon" &&
               std::find(names.begin(), names.end(), d.substr(0, d.size() - 7)) != names.end();
      } else if (k == NodeKind::kCall &&
                 file.qualified_name(file.callee(id)) == "atexit.register") {
        safe = mentions_any(tree, id, names);
      }
    }
    if (safe) continue;
    // Made and returned by a method whose result the class keeps
    // (`self.executor = self.make_executor()`): the attribute reaches it.
    if (s.class_node != kNoNode && !names.empty() && returned_by_scope(file, scope, names)) {
      for (std::string& a : attributes_keeping_result_of(file, s.class_node, s.name)) {
        if (std::find(names.begin(), names.end(), a) == names.end()) names.push_back(a);
      }
    }
    // Kept on an object (`self.proc = p`, `self.procs.append(p)`): its class
    // manages the lifetime (close(), kill(), __exit__).
    bool kept_on_self = false;
    for (const auto& n : names) kept_on_self |= n.rfind("self.", 0) == 0;
    if (kept_on_self && s.class_node != kNoNode &&
        (cleans_up(file, s.class_node, names) || handed_over_by_class(file, s.class_node, names))) {
      continue;
    }
    // p.start() immediately followed by p.join(), or by handing p to
    // someone else (`return p`, `wait_for(p)`): nothing can fail between.
    // In a loop that starts and collects the processes (`procs.append(p)`),
    // the first statement after the loop decides: a join loop over the list.
    if (!names.empty()) {
      NodeId statement = statement_of(tree, call);
      bool decided = false;
      for (int level = 0; level < 4 && !decided && statement != kNoNode; ++level) {
        for (NodeId st = tree.next_sibling(statement); st != kNoNode; st = tree.next_sibling(st)) {
          if (!tree.node(st).named || tree.kind(st) == NodeKind::kComment) continue;
          bool starts_or_collects = false;
          for (NodeId id = st; id < tree.node(st).subtree_end; ++id) {
            if (tree.kind(id) != NodeKind::kCall) continue;
            std::string_view m = file.callee_last_name(id);
            if (m == "start" ||
                (is_collecting_method(m) &&
                 std::find(names.begin(), names.end(),
                           dotted_text(tree, file.method_receiver(id))) != names.end())) {
              starts_or_collects = true;
            }
          }
          if (starts_or_collects && !cleans_up(file, st, names)) continue;
          if (cannot_raise(tree, st)) continue;  // `failed = False`
          // After the starting loop, handing the whole list to a call
          // (`monitor(procs)`) may still raise; a loop that waits for each
          // one (`for p in procs: wait(p)`) does not leave any behind.
          safe = cleans_up(file, st, names) ||
                 (level == 0 ? hands_over(file, st, names) : waits_for_each(file, st, names));
          decided = true;
          break;
        }
        if (decided) break;
        // The block ended: a loop body continues after its loop; the body
        // of a `try` (whose handlers run only if something in it raised,
        // the start included), of an `if` branch or of a `with` continues
        // after that statement.
        NodeId block = tree.parent(statement);
        NodeId owner = block != kNoNode ? tree.parent(block) : kNoNode;
        if (owner != kNoNode && (tree.kind(owner) == NodeKind::kElseClause ||
                                 tree.kind(owner) == NodeKind::kElifClause)) {
          owner = tree.parent(owner);  // the if statement
        }
        if (owner == kNoNode || (tree.kind(owner) != NodeKind::kForStatement &&
                                 tree.kind(owner) != NodeKind::kWhileStatement &&
                                 tree.kind(owner) != NodeKind::kIfStatement &&
                                 tree.kind(owner) != NodeKind::kWithStatement &&
                                 !(tree.kind(owner) == NodeKind::kTryStatement &&
                                   tree.child_by_field(owner, Field::kBody) == block))) {
          break;
        }
        statement = owner;
      }
    }
    if (safe) continue;
    RuleReport r;
    r.node = call;
    r.message = fmt::format(
        "`{}` starts a child process that nothing joins or terminates if the code after it "
        "raises: the child outlives the failure, with its GPU memory",
        quote(file, call, 50));
    if (!names.empty()) {
      r.fix = fmt::format(
          "wrap the code after the start in a `try:` whose `finally:` calls `{}.terminate()` "
          "and `{}.join()` (for a list, in a loop over it), or start it in a `with` block",
          names.front(), names.front());
    }
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_process_not_joined_on_failure_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
