#include "lightning_hooks.h"

#include <fmt/format.h>

#include <string_view>

#include "vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr std::size_t kNoOutputs = static_cast<std::size_t>(-1);

bool is_batch_end_hook(std::string_view name) {
  return name == "on_train_batch_end" || name == "on_validation_batch_end" ||
         name == "on_test_batch_end" || name == "on_predict_batch_end";
}

// A Lightning Callback: a base named like one (`Callback`,
// `BasePredictionWriter`), or a hook whose first parameters are Lightning's
// (trainer, pl_module) when the base comes from elsewhere.
bool is_callback(const ClassFacts& owner, const Scope& scope) {
  for (const std::string& base : owner.bases) {
    std::string_view last = vocabulary::last_component(base);
    if (last.ends_with("Callback") || last.ends_with("PredictionWriter")) return true;
  }
  return scope.parameters.size() >= 3 && scope.parameters[1] == "trainer";
}

}  // namespace

std::size_t lightning_outputs_parameter(const FileAnalysis& file, std::size_t scope) {
  const Scope& s = file.scopes()[scope];
  if (s.class_node == kNoNode || !is_batch_end_hook(s.name)) return kNoOutputs;
  const ClassFacts* owner = file.class_facts(s.class_node);
  if (owner == nullptr) return kNoOutputs;
  // After self; a callback's hooks are handed trainer and pl_module first.
  std::size_t index = 1;
  if (!owner->is_lightning) {
    if (!is_callback(*owner, s)) return kNoOutputs;
    index += 2;
  }
  // `outputs` is followed by `batch` and `batch_idx`.
  return index + 2 < s.parameters.size() ? index : kNoOutputs;
}

bool is_predict_batch_hook(const FileAnalysis& file, std::size_t scope) {
  return file.scopes()[scope].name == "on_predict_batch_end" &&
         lightning_outputs_parameter(file, scope) != kNoOutputs;
}

std::string lightning_parameter_evidence(const FileAnalysis& file, std::size_t scope,
                                         FlowBits parameter_sources) {
  std::size_t index = lightning_outputs_parameter(file, scope);
  if (index == kNoOutputs) return {};
  std::size_t bit = index - 1;  // bits count the parameters after self
  if (bit >= 32 || !(parameter_sources & (FlowBits{1} << bit))) return {};
  const Scope& s = file.scopes()[scope];
  return fmt::format("`{}` is what Lightning hands `{}`: the step's outputs, on the GPU",
                     s.parameters[index], s.name);
}

}  // namespace gpuleak::lint
