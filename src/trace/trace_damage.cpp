#include "trace/trace_damage.h"

#include <algorithm>

namespace gpuleak::trace {

bool DamageDetector::observe(const Record& record) {
  if (records_++ == 0) starts_with_process_ = std::holds_alternative<ProcessRecord>(record);
  if (const auto* p = std::get_if<ProcessRecord>(&record)) {
    if (!process_) {
      process_ = *p;
    } else if (!(*p == *process_)) {
      // The same record again is a repeated first block (the sequencer
      // reports its events); a different one is another process.
      foreign_ = *p;
      return false;
    }
  } else if (std::holds_alternative<ExitRecord>(record)) {
    exited_ = true;
  }
  return true;
}

std::vector<std::string> DamageDetector::judge(const SequenceFindings& f,
                                               bool stopped_early) const {
  std::vector<std::string> damage;
  if (records_ > 0 && !starts_with_process_) {
    damage.push_back(
        "the trace does not start with its process record: its first block is missing, or the "
        "file is not the start of a trace");
  }

  // Numbers that never came and that no lost record declared.
  std::uint64_t excused = 0;
  const SequenceGap* first_unexcused = nullptr;
  for (const SequenceGap& gap : f.gaps) {
    bool killed_tail =
        gap.at_end && !exited_ &&
        gap.latest_time_ns - std::min(gap.latest_time_ns, gap.time_before_ns) <= kKilledTailNs;
    if ((gap.at_end && stopped_early) || killed_tail) {
      excused += gap.count;
    } else if (!first_unexcused) {
      first_unexcused = &gap;
    }
  }
  std::uint64_t unexplained = f.undeclared_skipped - std::min(excused, f.undeclared_skipped);
  // Old collectors declared only a count: what the count did not cover yet.
  std::uint64_t counted_left =
      f.lost_events_counted - std::min(f.counted_skipped, f.lost_events_counted);
  unexplained -= std::min(unexplained, counted_left);
  if (unexplained > 0) {
    std::string where;
    if (first_unexcused) {
      where = " (sequence numbers " + std::to_string(first_unexcused->first_seq) + " to " +
              std::to_string(first_unexcused->first_seq + first_unexcused->count - 1) +
              (unexplained > first_unexcused->count ? ", and others" : "") + ")";
    }
    damage.push_back(std::to_string(unexplained) +
                     (unexplained == 1 ? " event is" : " events are") + " missing" + where +
                     " and the collector did not record them as lost: part of the file is missing");
  }
  if (f.repeated_events > 0) {
    damage.push_back(std::to_string(f.repeated_events) +
                     (f.repeated_events == 1 ? " event repeats a sequence number"
                                             : " events repeat sequence numbers") +
                     " already read (the first " + std::to_string(f.first_repeated_seq) +
                     "): a block appears twice, or blocks of another trace were spliced in; the "
                     "repeats were not counted");
  }
  return damage;
}

}  // namespace gpuleak::trace
