// GL202: a forward/backward hook saves the tensors it sees into a container
// outside the hook, one more per call.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL202",
    "hook-keeps-activations",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "A module or tensor hook saves activations into a container that grows on every call.",
    "A forward or backward hook runs on every call of its module, every training step. A tensor "
    "it appends to a list (or stores under a new key) outside the hook stays on the GPU for as "
    "long as that container lives, so memory grows step by step; if the tensor still has its "
    "graph (no `.detach()`), the whole step's activations stay with it.",
    "Keep only what the current step needs: overwrite one slot (`features[name] = "
    "output.detach()`), move it off the GPU (`output.detach().cpu()`), clear the container after "
    "each step, or remove the hook (`handle.remove()`) when done.",
};

class HookKeepsActivations final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    for (const StoreEvent& store : file.stores()) {
      if (!file.is_hook_scope(store.scope)) continue;
      if (!(store.value_bits & (kDeviceTensor | kCarriesGraph))) continue;
      bool grows = false;
      switch (store.kind) {
        case StoreKind::kAppend:
        case StoreKind::kExtend:
        case StoreKind::kSelfUpdate:
          grows = true;
          break;
        case StoreKind::kSubscript:
          grows = key_varies_per_step(file, store.key);
          break;
        case StoreKind::kAugmented: {
          NodeKind k = file.tree().kind(store.value);
          grows = k == NodeKind::kList || k == NodeKind::kTuple;
          break;
        }
        default:
          break;
      }
      if (!grows) continue;
      const Scope& hook = file.scopes()[store.scope];
      std::string container = container_path(file, store.container);
      if (container.empty()) continue;
      std::string root = container.substr(0, container.find('.'));
      bool outer = root == "self" || hook.declared_global.count(root) || !hook.assigned.count(root);
      for (const auto& p : hook.parameters) {
        if (p == root && root != "self") outer = false;
      }
      if (!outer || container_bounded_elsewhere(file, container)) continue;
      RuleReport r;
      r.node = store.site;
      r.message = fmt::format(
          "the hook `{}` stores `{}` in `{}` on every call of its module: one activation tensor "
          "more per step, never released",
          hook.name, quote(file, store.value, 40), container);
      r.fix = fmt::format(
          "overwrite one slot per module (`{}[name] = {}.detach()`), store `{}.detach().cpu()`, "
          "or call `{}.clear()` after each step",
          container, quote(file, store.value, 30), quote(file, store.value, 30), container);
      sink.report(kInfo, std::move(r));
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_hook_keeps_activations_rule() {
  return std::make_unique<HookKeepsActivations>();
}

}  // namespace gpuleak::lint
