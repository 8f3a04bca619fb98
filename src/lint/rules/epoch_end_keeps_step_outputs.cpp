// GL204: a LightningModule that implements training_epoch_end (or the
// validation/test ones) and returns GPU tensors from the matching *_step:
// Lightning before 2.0 keeps every step's return value until the epoch ends.
// Likewise a predict_step returning GPU tensors: trainer.predict keeps every
// batch's result for the pass (return_predictions=True by default).
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL204",
    "epoch-end-keeps-step-outputs",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "A `*_step` returns GPU tensors that Lightning keeps for `*_epoch_end` until the epoch ends.",
    "When a LightningModule implements `training_epoch_end` (or `validation_epoch_end`, "
    "`test_epoch_end`), Lightning before 2.0 stores the return value of every "
    "`training_step` call of the epoch to pass them all to it. Whatever the step returns besides "
    "the loss (model outputs, batches, features) therefore stays on the GPU for the whole epoch, "
    "and memory grows with the number of batches. Lightning 2.0 removed these hooks for this "
    "reason. `trainer.predict` does the same with every `predict_step` result unless called "
    "with `return_predictions=False`.",
    "Return only the loss (and Python numbers) from the step; keep what the epoch end needs "
    "yourself, detached and on the host (`self.outputs.append(out.detach().cpu())`), and move the "
    "code to `on_train_epoch_end`, which receives nothing.",
};

// `trainer.predict(..., return_predictions=False)` in the file: Lightning
// keeps nothing (a writer callback gets each batch's results). Or
// `predictions = trainer.predict(...)`: the caller asked for the list, and
// keeping it is the point.
bool predictions_not_returned(const FileAnalysis& file) {
  const SyntaxTree& tree = file.tree();
  // A script that runs its trainer (`cli.trainer.fit(...)`) and never calls
  // predict: predict_step does not run (pytorch-lightning's profiler example).
  if (file.calls_named("predict").empty()) {
    for (std::string_view run : {"fit", "validate", "test"}) {
      for (NodeId call : file.calls_named(run)) {
        NodeId receiver = file.method_receiver(call);
        std::string d = receiver != kNoNode ? dotted_text(tree, receiver) : std::string();
        if (vocabulary::last_component(d).find("trainer") != std::string_view::npos) return true;
      }
    }
  }
  for (NodeId call : file.calls_named("predict")) {
    NodeId flag = file.keyword_argument(call, "return_predictions");
    if (flag != kNoNode && tree.kind(flag) == NodeKind::kFalse) return true;
    NodeId parent = tree.parent(call);
    if (parent != kNoNode && file.method_receiver(call) != kNoNode &&
        (tree.kind(parent) == NodeKind::kAssignment ||
         tree.kind(parent) == NodeKind::kReturnStatement)) {
      return true;
    }
  }
  return false;
}

// `return {"loss": loss, "scalar_loss": scalar_loss}`: Lightning detaches
// the `loss` entry it keeps, not the others. An entry that carries a graph
// keeps its step's activations whatever its size (a side loss is a scalar),
// one holding a GPU tensor keeps that tensor; each is reported where it is
// written, the line a fix changes. True when an entry was reported.
bool report_dict_entries(const FileAnalysis& file, NodeId value, const std::string& hook,
                         FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  if (tree.kind(value) != NodeKind::kDictionary) return false;
  bool reported = false;
  for (NodeId pair : tree.named_children(value)) {
    if (tree.kind(pair) != NodeKind::kPair) continue;
    NodeId key = tree.child_by_field(pair, Field::kKey);
    NodeId entry = tree.child_by_field(pair, Field::kValue);
    if (key == kNoNode || entry == kNoNode) continue;
    std::string_view key_text = tree.text(key);
    if (key_text == "\"loss\"" || key_text == "'loss'") continue;
    std::uint8_t bits = file.value_bits(entry);
    bool graph = (bits & kCarriesGraph) != 0;
    if (!graph && !((bits & kDeviceTensor) && (bits & kNonScalar))) continue;
    RuleReport r;
    r.node = pair;
    r.message = fmt::format(
        "`{}` in the dict this step returns {}, and `{}` is implemented: Lightning keeps every "
        "step's dict until the epoch ends and detaches only its `loss` entry",
        quote(file, pair),
        graph ? "carries an autograd graph (the step's activations)" : "holds GPU tensors", hook);
    r.fix = fmt::format("return `{}.detach()` (or `.item()` for a number), or leave it out",
                        quote(file, entry));
    sink.report(kInfo, std::move(r));
    reported = true;
  }
  return reported;
}

// `trainer.predict(model, datamodule=dm)` as a statement: the result is
// thrown away (a writer callback saves the predictions, or nothing does),
// yet Lightning keeps every batch's predictions until the pass ends.
void check_discarded_predictions(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  // A predict_step in this file says what is kept: GPU tensors are
  // reported at its return, host copies are small.
  if (!file.scopes_named("predict_step").empty()) return;
  for (NodeId call : file.calls_named("predict")) {
    NodeId statement = tree.parent(call);
    if (statement == kNoNode || tree.kind(statement) != NodeKind::kExpressionStatement) continue;
    NodeId receiver = file.method_receiver(call);
    if (receiver == kNoNode) continue;
    // The user's own Trainer, not a framework's `self._trainer` inside
    // its tuner; not a test that runs a few batches through predict.
    std::string holder = dotted_text(tree, receiver);
    if (holder != "trainer" && holder != "self.trainer") continue;
    if (file.keyword_argument(call, "return_predictions") != kNoNode) continue;
    if (file.scope_of(call).name.rfind("test", 0) == 0) continue;
    RuleReport r;
    r.node = call;
    r.message = fmt::format(
        "`{}` throws its result away, but `return_predictions` defaults to True: Lightning "
        "keeps every batch's `predict_step` output until the pass ends",
        quote(file, call));
    r.fix = fmt::format("pass `return_predictions=False` to `{}.predict`", holder);
    sink.report(kInfo, std::move(r));
  }
}

void check(const FileAnalysis& file, FindingSink& sink) {
  const SyntaxTree& tree = file.tree();
  const auto& scopes = file.scopes();
  for (std::size_t s = 1; s < scopes.size(); ++s) {
    const Scope& step = scopes[s];
    if (step.class_node == kNoNode) continue;
    const ClassFacts* owner = file.class_facts(step.class_node);
    if (owner == nullptr || !owner->is_lightning) continue;
    std::string_view name = step.name;
    std::string_view phase = name == "training_step"     ? "training"
                             : name == "validation_step" ? "validation"
                             : name == "test_step"       ? "test"
                             : name == "predict_step"    ? "predict"
                                                         : "";
    if (phase.empty()) continue;
    bool predict = phase == "predict";
    std::string hook = std::string(phase) + "_epoch_end";
    bool implemented = false;
    for (std::size_t other : file.scopes_named(hook)) {
      if (scopes[other].class_node == step.class_node) implemented = true;
    }
    // trainer.predict keeps every predict_step result for the whole pass
    // (return_predictions defaults to True), with or without a hook.
    if (predict ? predictions_not_returned(file) : !implemented) continue;
    for (NodeId id = step.node; id < tree.node(step.node).subtree_end; ++id) {
      if (tree.kind(id) != NodeKind::kReturnStatement || file.scope_index_of(id) != s) continue;
      NodeId value = tree.first_named_child(id);
      if (value == kNoNode) continue;
      if (!predict && report_dict_entries(file, value, hook, sink)) continue;
      std::uint8_t bits = file.value_bits(value);
      if (!(bits & kDeviceTensor) || !(bits & kNonScalar)) continue;
      RuleReport r;
      r.node = id;
      if (predict) {
        r.message = fmt::format(
            "`{}` returns GPU tensors from `predict_step`: `trainer.predict` keeps the return "
            "value of every batch (return_predictions=True by default) until the pass ends",
            quote(file, id));
        r.fix =
            "return host copies (`{k: v.detach().cpu() for k, v in out.items()}`), or call "
            "`trainer.predict(..., return_predictions=False)` when a prediction writer "
            "callback saves them";
      } else {
        r.message = fmt::format(
            "`{}` returns GPU tensors besides a loss, and `{}` is implemented: Lightning keeps "
            "this return value of every batch until the epoch ends",
            quote(file, id), hook);
      }
      sink.report(kInfo, std::move(r));
    }
  }
  check_discarded_predictions(file, sink);
}

}  // namespace

std::unique_ptr<Rule> make_epoch_end_keeps_step_outputs_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
