// The words people read for severities and causes.
#include "lint.h"

namespace gpuleak::lint {

std::string_view severity_name(Severity severity) {
  switch (severity) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "warning";
}

std::string_view cause_slug(Cause cause) {
  switch (cause) {
    case Cause::kAutogradGraphKept:
      return "autograd-graph-kept";
    case Cause::kTensorsKeptAlive:
      return "tensors-kept-alive";
    case Cause::kWorkersWithCuda:
      return "dataloader-workers-with-cuda";
    case Cause::kContextsLeftBehind:
      return "contexts-left-behind";
    case Cause::kIneffectiveFix:
      return "ineffective-fix";
    case Cause::kRaisesAtRuntime:
      return "raises-at-runtime";
    case Cause::kCorrectness:
      return "correctness-not-a-leak";
  }
  return "unknown";
}

std::string_view cause_title(Cause cause) {
  switch (cause) {
    case Cause::kAutogradGraphKept:
      return "autograd graph kept";
    case Cause::kTensorsKeptAlive:
      return "tensors kept alive";
    case Cause::kWorkersWithCuda:
      return "DataLoader workers with CUDA";
    case Cause::kContextsLeftBehind:
      return "CUDA contexts left behind";
    case Cause::kIneffectiveFix:
      return "ineffective fix, frees nothing leaked";
    case Cause::kRaisesAtRuntime:
      return "raises at run time";
    case Cause::kCorrectness:
      return "correctness bug, not a leak";
  }
  return "unknown";
}

}  // namespace gpuleak::lint
