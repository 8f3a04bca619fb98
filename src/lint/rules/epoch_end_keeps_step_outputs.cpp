// GL204: a LightningModule that implements training_epoch_end (or the
// validation/test ones) and returns GPU tensors from the matching *_step:
// Lightning before 2.0 keeps every step's return value until the epoch ends.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"

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
    "reason.",
    "Return only the loss (and Python numbers) from the step; keep what the epoch end needs "
    "yourself, detached and on the host (`self.outputs.append(out.detach().cpu())`), and move the "
    "code to `on_train_epoch_end`, which receives nothing.",
};

class EpochEndKeepsStepOutputs final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
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
                                                           : "";
      if (phase.empty()) continue;
      std::string hook = std::string(phase) + "_epoch_end";
      bool implemented = false;
      for (std::size_t other : file.scopes_named(hook)) {
        if (scopes[other].class_node == step.class_node) implemented = true;
      }
      if (!implemented) continue;
      for (NodeId id = step.node; id < tree.node(step.node).subtree_end; ++id) {
        if (tree.kind(id) != NodeKind::kReturnStatement || file.scope_index_of(id) != s) continue;
        NodeId value = tree.first_named_child(id);
        if (value == kNoNode) continue;
        std::uint8_t bits = file.value_bits(value);
        if (!(bits & kDeviceTensor) || !(bits & kNonScalar)) continue;
        RuleReport r;
        r.node = id;
        r.message = fmt::format(
            "`{}` returns GPU tensors besides a loss, and `{}` is implemented: Lightning keeps "
            "this return value of every batch until the epoch ends",
            quote(file, id), hook);
        sink.report(kInfo, std::move(r));
      }
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_epoch_end_keeps_step_outputs_rule() {
  return std::make_unique<EpochEndKeepsStepOutputs>();
}

}  // namespace gpuleak::lint
