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
::gpuleak::vocabulary::Cause shared_cause(Cause cause) {
  switch (cause) {
    case Cause::kAutogradGraphKept:
      return ::gpuleak::vocabulary::Cause::kAutogradGraphKeptAlive;
    case Cause::kTensorsKeptAlive:
      return ::gpuleak::vocabulary::Cause::kTensorsKeptAlive;
    case Cause::kWorkersWithCuda:
      return ::gpuleak::vocabulary::Cause::kDataloaderWorkersWithCuda;
    case Cause::kContextsLeftBehind:
      return ::gpuleak::vocabulary::Cause::kContextsLeftBehind;
    case Cause::kIneffectiveFix:
      return ::gpuleak::vocabulary::Cause::kIneffectiveFix;
    case Cause::kRaisesAtRuntime:
      return ::gpuleak::vocabulary::Cause::kRaisesAtRuntime;
    case Cause::kCorrectness:
      return ::gpuleak::vocabulary::Cause::kCorrectnessNotALeak;
  }
  return ::gpuleak::vocabulary::Cause::kTensorsKeptAlive;
}
}  // namespace

std::string_view cause_slug(Cause cause) {
  return ::gpuleak::vocabulary::cause_slug(shared_cause(cause));
}

std::string_view cause_title(Cause cause) {
  return ::gpuleak::vocabulary::cause_title(shared_cause(cause));
}

}  // namespace gpuleak::lint
