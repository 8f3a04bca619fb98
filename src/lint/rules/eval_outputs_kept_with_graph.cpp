// GL102: outputs (or losses) kept during evaluation while autograd is on.
#include <fmt/format.h>

#include "lint/fix_text.h"
#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL102",
    "eval-outputs-kept-with-graph",
    Severity::kError,
    Cause::kAutogradGraphKept,
    "Model outputs are kept during evaluation without torch.no_grad() or "
    "torch.inference_mode().",
    "`model.eval()` only switches layers such as dropout and batch norm to inference behaviour; "
    "it does not turn autograd off. Every forward pass of this loop still records a graph, and "
    "keeping its outputs (or a loss computed from them) keeps every activation of every batch "
    "on the GPU until the container is dropped, so memory grows with the number of batches.",
    "Run evaluation under `with torch.no_grad():` or `with torch.inference_mode():` (or decorate "
    "the function with `@torch.no_grad()`); keep `.item()` numbers or `.detach().cpu()` tensors.",
};

void check(const FileAnalysis& file, FindingSink& sink) {
  auto visit = [&](const StoreEvent& store, const GrowthVerdict& growth) {
    RuleReport r;
    r.node = store.site;
    r.message = fmt::format(
        "`{}` keeps `{}` during evaluation with autograd on: `{}` holds the graph and "
        "activations of every batch",
        quote(file, store.site), quote(file, store.value, 40), growth.container);
    const Scope& scope = file.scopes()[store.scope];
    std::string iterable =
        growth.loop != kNoNode ? whole_code(file, file.loop_iterable(growth.loop), 40) : "";
    std::string where = !iterable.empty()        ? fmt::format("the loop over `{}`", iterable)
                        : growth.loop != kNoNode ? std::string("the evaluation loop")
                                                 : std::string("the evaluation code");
    r.fix = scope.node == file.tree().root()
                ? fmt::format("wrap {} in `with torch.no_grad():`", where)
                : fmt::format(
                      "wrap {} in `with torch.no_grad():`, or decorate `{}` with "
                      "`@torch.no_grad()`",
                      where, scope.name);
    sink.report(kInfo, std::move(r));
  };
  for_each_graph_kept_across_steps(file, StepPurpose::kEvaluation, visit);
}

}  // namespace

std::unique_ptr<Rule> make_eval_outputs_kept_with_graph_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
