// The words people read for severities and causes.
#include "gpuleak/vocabulary.h"
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

// The causes are the vocabulary's (include/gpuleak/vocabulary.h): the same
// slug and title as the analysis prints for a growth verdict.
namespace {
vocabulary::Cause shared_cause(Cause cause) {
  switch (cause) {
    case Cause::kAutogradGraphKept:
      return vocabulary::Cause::kAutogradGraphKeptAlive;
    case Cause::kTensorsKeptAlive:
      return vocabulary::Cause::kTensorsKeptAlive;
    case Cause::kWorkersWithCuda:
      return vocabulary::Cause::kDataloaderWorkersWithCuda;
    case Cause::kContextsLeftBehind:
      return vocabulary::Cause::kContextsLeftBehind;
    case Cause::kIneffectiveFix:
      return vocabulary::Cause::kIneffectiveFix;
    case Cause::kRaisesAtRuntime:
      return vocabulary::Cause::kRaisesAtRuntime;
    case Cause::kCorrectness:
      return vocabulary::Cause::kCorrectnessNotALeak;
  }
  return vocabulary::Cause::kTensorsKeptAlive;
}
}  // namespace

std::string_view cause_slug(Cause cause) { return vocabulary::cause_slug(shared_cause(cause)); }

std::string_view cause_title(Cause cause) { return vocabulary::cause_title(shared_cause(cause)); }

}  // namespace gpuleak::lint
