// GL201: GPU tensors (without a graph) stored every step into a container
// that outlives the loop: an attribute, a global, a cache keyed by step, a
// list kept across epochs.
#include <fmt/format.h>

#include "lint/rules/rule_factories.h"
#include "lint/store_growth.h"
#include "lint/training_loop.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL201",
    "tensor-kept-in-growing-container",
    Severity::kWarning,
    Cause::kTensorsKeptAlive,
    "GPU tensors are stored every step into a container that is never emptied.",
    "A stored tensor stays allocated on the GPU for as long as the container references it. A "
    "container that outlives the loop (an attribute, a global, a cache keyed by step, a list "
    "kept across epochs) gains one tensor per step, so allocated memory grows linearly until it "
    "is cleared. `.detach()` drops the autograd graph but not the tensor itself.",
    "Store Python numbers (`.item()`) or host copies (`.detach().cpu()`), bound the container "
    "(`collections.deque(maxlen=N)`), or clear it once it has been used (for example at the end "
    "of each epoch).",
};

bool is_growing_kind(const FileAnalysis& file, const StoreEvent& store) {
  switch (store.kind) {
    case StoreKind::kAppend:
    case StoreKind::kExtend:
    case StoreKind::kSubscript:
    case StoreKind::kSelfUpdate:
      return true;
    case StoreKind::kAugmented: {
      // `outputs += [out]` grows a list; `total += x` replaces a number.
      NodeKind k = file.tree().kind(store.value);
      return k == NodeKind::kList || k == NodeKind::kTuple || k == NodeKind::kListComprehension;
    }
    default:
      return false;
  }
}

class TensorKeptInGrowingContainer final : public Rule {
 public:
  const RuleInfo& info() const override { return kInfo; }

  void check(const FileAnalysis& file, FindingSink& sink) const override {
    for (const StoreEvent& store : file.stores()) {
      if (!(store.value_bits & kDeviceTensor)) continue;
      if (store.value_bits & (kCarriesGraph | kException)) continue;  // GL101/GL102, GL203
      if (file.is_hook_scope(store.scope) || !is_growing_kind(file, store)) continue;
      GrowthVerdict growth = store_growth(file, store);
      if (growth.growth == Growth::kBounded) continue;
      if (growth.growth == Growth::kPerIteration && growth.local) {
        // Collecting one pass's outputs in a local list is what evaluation
        // does; it becomes a leak when the list survives an outer (epoch)
        // loop or the loop never ends.
        bool unbounded = file.is_unbounded_loop(growth.loop);
        if (growth.loops_outlived < 2 && !unbounded) continue;
        // Nested loops over shapes or layers inside one call are not steps.
        if (!any_step_loop(file, growth.loop, growth.loops_outlived)) continue;
      }
      RuleReport r;
      r.node = store.site;
      std::string when = growth.growth == Growth::kPerCall
                             ? fmt::format("every call of `{}`", file.scopes()[store.scope].name)
                         : growth.loops_outlived >= 2 ? std::string("every step of every epoch")
                                                      : std::string("every iteration");
      r.message = fmt::format(
          "`{}` stores a GPU tensor in `{}` on {}, and `{}` is never emptied: one tensor more "
          "per step",
          quote(file, store.site), growth.container, when, growth.container);
      r.fix = fmt::format(
          "store `{}.item()` or `{}.detach().cpu()`, or empty `{}` when its contents have been "
          "used (`{}.clear()`)",
          quote(file, store.value, 30), quote(file, store.value, 30), growth.container,
          growth.container);
      sink.report(kInfo, std::move(r));
    }
  }
};

}  // namespace

std::unique_ptr<Rule> make_tensor_kept_in_growing_container_rule() {
  return std::make_unique<TensorKeptInGrowingContainer>();
}

}  // namespace gpuleak::lint
