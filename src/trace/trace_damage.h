// Damage that leaves a trace readable but wrong: a block missing from the
// middle, a block that appears twice, another trace's blocks spliced or
// appended, a trace that does not start with its process record. The reader
// cannot see these (each block is intact); the records can.
//
// Feed every record to observe() in file order, before the EventSequencer,
// and at the end ask judge() with the sequencer's findings. Each damage
// found is one sentence for people (docs/trace-format.md, "Damaged traces").
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/event_sequencer.h"
#include "trace/records.h"

namespace gpuleak::trace {

class DamageDetector {
 public:
  // Returns false when `record` begins another process's trace (a second,
  // different ProcessRecord): nothing from there on belongs to this process.
  bool observe(const Record& record);

  bool saw_records() const { return records_ > 0; }
  const std::optional<ProcessRecord>& foreign_process() const { return foreign_; }

  // The damage found. `stopped_early`: reading ended at a TraceError, so
  // numbers missing at the end are that error's consequence, not damage.
  std::vector<std::string> judge(const SequenceFindings& findings, bool stopped_early) const;

  // A gap that ends the input in a process that never exited, and spans at
  // most this much event time, is the unflushed end of a killed process.
  static constexpr std::uint64_t kKilledTailNs = 10'000'000'000ull;

 private:
  std::uint64_t records_ = 0;
  bool starts_with_process_ = false;
  std::optional<ProcessRecord> process_;
  std::optional<ProcessRecord> foreign_;
  bool exited_ = false;
};

}  // namespace gpuleak::trace
