// Sentences of the growth verdict that come from the growth tracker's facts
// rather than from a cause: a growth that stopped, and events that were
// lost while the steps were judged.
//
// Pure functions, thread-safe.
#pragma once

#include <string>

#include "analysis/growth/growth_tracker.h"
#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

// "memory grew from step 1 until step 200 and has been flat for 100,000
// steps since: it is held, not leaking now" for a site with grew_until_step.
std::string stopped_growth_text(const SiteGrowth& site);

// Says in `growth` how many steps of the judged window lost events, and what
// that means: their changes were left out of every site's trend; when more
// than half of the window lost events, "NO LEAK" cannot be said and the
// verdict is "NOT YET" (a LEAK found in the other steps stands).
void describe_lost_events(const GrowthTracker& tracker, GrowthReport& growth);

}  // namespace gpuleak::analysis
