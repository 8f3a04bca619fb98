// What the Python package found holding the memory of growing sites: the
// `holder` annotations it writes into the trace (one per answered request,
// docs/python.md), read into one finding per site.
//
// The annotation is input, and a crafted trace may hold anything: an answer
// that is not an object with a `sites` array is ignored, a site without a
// valid `site_id` is skipped, a field of the wrong type reads as missing.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

// What the Python package found holding one growing site's memory.
struct HolderFinding {
  HolderAnswer answer;  // the site's answer, as the package wrote it
  std::string kind;     // "tensor", "graph", "unknown"
  bool bounded = false;
  std::string fix;
  std::string description;  // "list `losses` (module __main__)"
};

class HolderFindings {
 public:
  // Reads one holder annotation's value. A later answer for a site replaces
  // an earlier one unless it is worth less: it found nothing where the
  // earlier one named a holder (a second walk that came too late must not
  // erase the first), or its walk ran out of time where the earlier one's
  // finished (a walk cut short on a bigger heap names what it reached).
  void add_answer(const std::string& annotation_value);

  // The finding for a site, or null; valid until the next add_answer().
  const HolderFinding* find(std::uint32_t site_id) const;

 private:
  std::map<std::uint32_t, HolderFinding> by_site_;
};

// Puts the site's answer into `growth` (for the verdict's top site, or its
// first bounded one), where every report reads it.
void report_holder(const HolderFinding& finding, GrowthReport& growth);

}  // namespace gpuleak::analysis
