// What a compacted trace keeps of the events it drops (records.h, "The
// compaction summary"): the process record, every definition, the
// allocations live now with their stacks, every annotation, context change
// and failed allocation, the latest sample of each metric and device, the
// step marks at a coarser resolution with what was live at each, and the
// counts of what was dropped, lost events included.
//
// Feed it every record in file order, as written (observe()); it restores
// the events' order itself (event_sequencer.h). encode() writes the summary
// of every event delivered so far, then the events still held back, raw: a
// file made of that and the records written after it reads as the whole
// trace would, but for the events dropped.
//
// Memory: proportional to the definitions, the live allocations, the
// annotations and at most kMaxStepPoints step marks; never to the events
// dropped.
//
// Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace/event_sequencer.h"
#include "trace/records.h"

namespace gpuleak::trace {

class TraceSummary {
 public:
  // Step marks kept at most: past it every other one goes, and the
  // resolution (one kept every `step_resolution` marks) doubles.
  static constexpr std::size_t kMaxStepPoints = 4096;

  TraceSummary();

  void observe(const Record& record);

  // Hands the summary (records.h order) and then the held-back events to
  // `write_block` as blocks of whole encoded records (at most
  // kSummaryBlockBytes and one record each); stops and returns false when
  // it does. `bound_bytes` is written into the CompactionRecord; once all
  // blocks are written the compaction it describes is counted.
  using BlockSink = std::function<bool(std::string_view records, std::uint32_t count)>;
  bool encode(const BlockSink& write_block, std::uint64_t bound_bytes);
  static constexpr std::size_t kSummaryBlockBytes = 8u << 20;

  std::uint64_t live_allocations() const { return live_.size(); }
  // Live memory as reports count it: tensors lie inside the driver's
  // allocations (a cache's segments) or are driver allocations themselves,
  // so it is the larger of device memory and tensor memory.
  std::uint64_t live_bytes() const { return std::max(device_bytes_, tensor_bytes_); }
  // Raw events delivered and not kept: what a compaction now would drop.
  std::uint64_t droppable_events() const { return droppable_; }
  std::uint64_t step_resolution() const { return step_resolution_; }
  std::uint64_t compactions() const { return compaction_.compactions; }

 private:
  struct Key {
    std::uint8_t space;
    std::uint64_t address;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::uint64_t>()(k.address * 31 + k.space);
    }
  };
  void count(const AllocRecord& allocation, bool added);
  void deliver(const Record& record);
  void keep(std::uint64_t seq, const Record& record);

  EventSequencer sequencer_;
  std::optional<ProcessRecord> process_;
  std::string definitions_;  // encoded, in the order they came
  std::uint32_t definition_count_ = 0;
  std::unordered_map<Key, AllocRecord, KeyHash> live_;
  std::uint64_t device_bytes_ = 0;  // memory that occupies the device
  std::uint64_t tensor_bytes_ = 0;  // tensor-level memory
  // Annotations, context changes, failed allocations, exits: by seq.
  std::map<std::uint64_t, Record> kept_;
  // The latest sample of each (metric, device).
  std::map<std::pair<std::uint8_t, std::int32_t>, SampleRecord> samples_;
  std::vector<StepSummaryRecord> steps_;
  std::uint64_t step_resolution_ = 1;
  std::uint64_t steps_since_kept_ = 0;
  CompactionRecord compaction_;  // counts so far (compactions: those done)
  std::uint64_t droppable_ = 0;
  bool saw_event_ = false;
};

}  // namespace gpuleak::trace
