// GL401: a process is forked after this process initialized CUDA.
#include <fmt/format.h>

#include "lint/cuda_use.h"
#include "lint/process_start.h"
#include "lint/rules/rule_factories.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL401",
    "fork-after-cuda-init",
    Severity::kError,
    Cause::kContextsLeftBehind,
    "A process is forked (multiprocessing's default start method, os.fork) after CUDA was "
    "initialized in the parent.",
    "CUDA does not survive `fork()`. The child gets a copy of the parent's CUDA state that it "
    "cannot use: any CUDA call in it fails (PyTorch: \"Cannot re-initialize CUDA in forked "
    "subprocess\"). It also inherits the parent's open GPU device handles, so a forked child that "
    "outlives its parent (orphaned after a crash or a kill) can keep the parent's device memory "
    "held. On Linux, multiprocessing forks unless told otherwise (before Python 3.14).",
    "Use the spawn (or forkserver) start method: `ctx = multiprocessing.get_context(\"spawn\")` "
    "then `ctx.Process(...)`, `torch.multiprocessing.spawn(...)`, or "
    "`set_start_method(\"spawn\")` under `if __name__ == \"__main__\":`; or start the processes "
    "before the parent first touches CUDA.",
};

// Inside `if __name__ == "__main__":` (runs last, when the module is run).
bool under_main_guard(const FileAnalysis& file, NodeId node) {
  const SyntaxTree& tree = file.tree();
  for (NodeId p = tree.parent(node); p != kNoNode; p = tree.parent(p)) {
    if (tree.kind(p) != NodeKind::kIfStatement) continue;
    NodeId condition = tree.child_by_field(p, Field::kCondition);
    if (condition != kNoNode && file.text(condition).find("__name__") != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

void check(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  // Module-level CUDA use outside the main guard happens at import, before
  // any function of the module runs.
  NodeId import_time_use = kNoNode;
  for (NodeId call : file.calls()) {
    if (file.scope_index_of(call) == 0 && call_uses_cuda(file, call) &&
        !under_main_guard(file, call)) {
      import_time_use = call;
      break;
    }
  }
  // The first call of each scope that uses CUDA, found on first need with
  // one pass over the calls (not one pass per fork).
  std::vector<NodeId> first_use;
  for (NodeId call : file.calls()) {
    ProcessStart kind = process_start_kind(file, call);
    if (kind == ProcessStart::kNone || kind == ProcessStart::kPopen) continue;
    if (start_method(file, call, kind) != "fork") continue;
    std::size_t scope = file.scope_index_of(call);
    if (first_use.empty()) {
      first_use.assign(file.scopes().size(), kNoNode);
      for (NodeId c : file.calls()) {
        std::size_t s = file.scope_index_of(c);
        if (first_use[s] == kNoNode && call_uses_cuda(file, c)) first_use[s] = c;
      }
    }
    NodeId use = first_use[scope];
    if (use != kNoNode && tree.node(use).start_byte >= tree.node(call).start_byte) use = kNoNode;
    if (use == kNoNode && scope != 0) use = import_time_use;
    if (use == kNoNode) continue;
    RuleReport r;
    r.node = call;
    r.message = fmt::format(
        "`{}` forks this process after `{}` initialized CUDA in it: the child cannot use CUDA, "
        "and it inherits the parent's GPU device handles",
        quote(file, call, 50), quote(file, use, 40));
    sink.report(kInfo, std::move(r));
  }
}

}  // namespace

std::unique_ptr<Rule> make_fork_after_cuda_init_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
