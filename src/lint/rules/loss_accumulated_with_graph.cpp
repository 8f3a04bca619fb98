// GL101: a tensor that still carries its autograd graph is accumulated
// across iterations (`total += loss`, `losses.append(loss)`, `h[step] = loss`).
#include <fmt/format.h>

#include "lint/fix_text.h"
#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"
#include "lint/training_loop.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL101",
    "loss-accumulated-with-graph",
    Severity::kError,
    Cause::kAutogradGraphKept,
    "A tensor that carries an autograd graph is accumulated across iterations.",
    "A loss or model output computed with gradients on references the autograd graph of the "
    "step that produced it. Accumulating it (`total += loss`, `losses.append(loss)`, "
    "`history[step] = loss`) keeps one more graph alive per iteration: before `backward()` (or "
    "when there is none) with every activation the forward pass saved, after it with the "
    "autograd nodes and loss tensors, one set per step. GPU memory grows every step until the "
    "accumulator is dropped.",
    "Accumulate a Python number: `total += loss.item()` (or `float(loss)`). To keep tensors, "
    "store `loss.detach()`, and `.cpu()` to take them off the GPU.",
};

// `self.running_mean.mul_(m).add_(mean * m)`: the in-place update links
// each call's graph into the kept tensor; say where the graph comes from.
void describe_in_place(const FileAnalysis& file, const StoreEvent& store, RuleReport& r) {
  std::string container = quote(file, store.container, 40);
  std::string value = quote(file, store.value, 40);
  r.message = fmt::format(
      "`{}` updates `{}` in place from `{}`, which carries an autograd graph: `{}` outlives the "
      "call, and each update links that call's graph to the ones before it",
      quote(file, store.site), container, value, container);
  const Scope& scope = file.scopes()[store.scope];
  if (store.graph_from_forward_input && scope.parameters.size() > 1) {
    r.message += fmt::format(
        " (`{}` is computed from `{}`, the input of `{}`: in training, the activations of the "
        "layers before it, which carry the graph)",
        value, scope.parameters[1], scope.name);
  }
  std::string detached = converted_code(file, store.value, store.value_bits | kNonScalar, false);
  r.fix = fmt::format(
      "update `{}` from `{}`, or under `with torch.no_grad():` (running statistics need no "
      "gradient)",
      container, detached.empty() ? "(" + value + ").detach()" : detached);
}

RuleReport describe(const FileAnalysis& file, const StoreEvent& store,
                    const GrowthVerdict& growth) {
  RuleReport r;
  r.node = store.site;
  std::string value = quote(file, store.value, 40);
  const std::string& container = growth.container;
  std::string span = growth.growth == Growth::kPerCall
                         ? fmt::format("every call of `{}`", file.scopes()[store.scope].name)
                     : growth.growth == Growth::kPerSize ? std::string("every new key")
                                                         : std::string("every iteration");
  std::string number = converted_code(file, store.value, store.value_bits & ~kNonScalar, false);
  bool one_number = !(store.value_bits & kNonScalar) && !number.empty();
  if (store.keeping_function != static_cast<std::size_t>(-1)) {
    const Scope& keeper = file.scopes()[store.keeping_function];
    const ClassFacts* owner =
        keeper.class_node != kNoNode ? file.class_facts(keeper.class_node) : nullptr;
    std::string callee = owner != nullptr ? owner->name + "." + keeper.name : keeper.name;
    r.message =
        growth.into_tensor
            // A helper's slot write into a tensor the caller made (`cur_dist[mask] = d`).
            ? fmt::format(
                  "`{}` hands `{}`, which carries an autograd graph, to `{}`, which writes it "
                  "into the tensor `{}`: each write links its graph to the buffer's earlier "
                  "ones, one graph more on {}",
                  quote(file, store.site), value, callee, container, span)
            : fmt::format(
                  "`{}` hands `{}`, which carries an autograd graph, to `{}`, which keeps what "
                  "it is given: one graph more on {}",
                  quote(file, store.site), value, callee, span);
    std::string passed =
        one_number ? number
                   : converted_code(file, store.value, store.value_bits | kNonScalar, false);
    r.fix = passed.empty()
                ? fmt::format("pass Python numbers (`.item()`) or detached tensors to `{}`", callee)
                : fmt::format("pass `{}` instead", passed);
    return r;
  }
  // A running sum says how to add a number instead (below).
  r.fix = store_instead(file, store.value, store.value_bits);
  switch (store.kind) {
    case StoreKind::kAugmented:
    case StoreKind::kSelfUpdate:
      r.message = fmt::format(
          "`{}` adds `{}`, which carries an autograd graph, to `{}` on {}: `{}` keeps the graph "
          "of every step it has summed",
          quote(file, store.site), value, container, span, container);
      if (one_number) {
        r.fix = fmt::format("`{} += {}` (a Python float; the graph is released each step)",
                            container, number);
      } else {
        std::string detached =
            converted_code(file, store.value, store.value_bits | kNonScalar, false);
        r.fix = detached.empty() ? fmt::format(
                                       "add detached values to `{}` (`.item()` for a number, "
                                       "`.detach()` for a tensor)",
                                       container)
                                 : fmt::format("`{} += {}` (the graph is released each step)",
                                               container, detached);
      }
      break;
    case StoreKind::kSubscript:
    case StoreKind::kSubscriptAugmented:
      if (growth.into_tensor) {
        r.message = fmt::format(
            "`{}` writes `{}`, which carries an autograd graph, into the tensor `{}` on {}: "
            "each write links its graph to the buffer's earlier ones, so `{}` keeps them all",
            quote(file, store.site), value, container, span, container);
      } else {
        r.message = fmt::format(
            "`{}` stores `{}`, which carries an autograd graph, under a key that changes on {}: "
            "`{}` keeps one graph per step",
            quote(file, store.site), value, span, container);
      }
      break;
    default:
      r.message = fmt::format(
          "`{}` keeps `{}`, which carries an autograd graph, in `{}` on {}: one graph more per "
          "step",
          quote(file, store.site), value, container, span);
      break;
  }
  return r;
}

void check(const FileAnalysis& file, FindingSink& sink) {
  auto visit = [&](const StoreEvent& store, const GrowthVerdict& growth) {
    // Summing a step's losses before its backward() is how a loss is built.
    // Not when one element at a time is differentiated (`losses[i].backward()`):
    // the container keeps every step's graph.
    if (store.evidence == kNoNode && differentiated_in_scope(file, growth.container, store.scope)) {
      return;
    }
    RuleReport r = describe(file, store, growth);
    // An in-place tensor update (`buf.add_(v)`) is recorded as an augmented
    // store at its call; `losses.append(loss)` keeps its own wording.
    if (store.kind == StoreKind::kAugmented && file.tree().kind(store.site) == NodeKind::kCall) {
      describe_in_place(file, store, r);
    }
    if (store.evidence != kNoNode) {
      // The chain of evidence: why this value is taken for a graph.
      r.message += fmt::format(" (`{}` at line {} shows the elements have a graph)",
                               quote(file, store.evidence, 50),
                               file.tree().start_point(store.evidence).row + 1);
    }
    sink.report(kInfo, std::move(r));
  };
  // Graphs kept in evaluation are GL102's.
  for_each_graph_kept_across_steps(file, StepPurpose::kTraining, visit);
}

}  // namespace

std::unique_ptr<Rule> make_loss_accumulated_with_graph_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
