#include "analysis/growth/growth_notes.h"

#include <fmt/format.h>

namespace gpuleak::analysis {

std::string stopped_growth_text(const SiteGrowth& site) {
  if (!site.grew_until_step) return "";
  return fmt::format(
      "memory grew from step {} until step {} and has been flat for {} steps since: it is held, "
      "not leaking now",
      site.first_growing_step, *site.grew_until_step, site.flat_steps);
}

void describe_lost_events(const GrowthTracker& tracker, GrowthReport& growth) {
  std::uint64_t begin = tracker.options().warmup_steps;
  std::uint64_t n = tracker.boundaries();
  std::uint64_t window =
      n > begin ? std::min<std::uint64_t>(n - begin, tracker.options().window_steps) : 0;
  growth.window_steps = window;
  growth.lossy_steps = tracker.lossy_boundaries_in_window();
  if (tracker.lost_events() == 0) return;
  std::string note;
  std::string lost = tracker.lost_events() == 1
                         ? std::string("1 event was lost")
                         : fmt::format("{} events were lost", tracker.lost_events());
  if (growth.lossy_steps == 0) {
    note = fmt::format("{}, none in the last {} steps the verdict is based on", lost, window);
  } else {
    note = fmt::format(
        "{}, in {} of the last {} steps; what those steps changed is left out of every site's "
        "growth (a lost free would look like a leak)",
        lost, growth.lossy_steps, window);
    if (growth.verdict == Verdict::kNoLeak && 2 * growth.lossy_steps > window) {
      growth.verdict = Verdict::kNotYet;
      note += "; too few complete steps to say there is no leak";
    }
  }
  growth.note = growth.note.empty() ? note : growth.note + "; " + note;
}

}  // namespace gpuleak::analysis
