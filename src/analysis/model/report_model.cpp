#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kLeak:
      return "LEAK";
    case Verdict::kNoLeak:
      return "NO LEAK";
    case Verdict::kNotYet:
      return "NOT YET";
  }
  return "NOT YET";
}

const char* where_name(Where where) {
  switch (where) {
    case Where::kNone:
      return "none";
    case Where::kGpu:
      return "gpu";
    case Where::kHost:
      return "host";
    case Where::kBoth:
      return "both";
  }
  return "none";
}

}  // namespace gpuleak::analysis
