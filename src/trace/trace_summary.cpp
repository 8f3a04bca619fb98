#include "trace/trace_summary.h"

#include <algorithm>
#include <type_traits>

#include "trace/codec.h"

namespace gpuleak::trace {

namespace {

// Kept events (annotations, context changes, failed allocations) beyond
// this many lose their middle: the first ones say how the process set
// itself up, the last ones what it did lately.
constexpr std::size_t kMaxKeptEvents = 1u << 16;

// The in-process sequencer holds only what one flush left out of order; a
// number that never comes is given up on well before the reader's limit.
constexpr std::size_t kMaxHeldEvents = 1u << 20;

}  // namespace

TraceSummary::TraceSummary() : sequencer_(kMaxHeldEvents) {}

void TraceSummary::count(const AllocRecord& allocation, bool added) {
  bool tensor = is_tensor_kind(allocation.kind);
  bool device = occupies_device(allocation.kind);
  auto change = [&](std::uint64_t& total) {
    total = added ? total + allocation.size : total - std::min(total, allocation.size);
  };
  if (tensor) change(tensor_bytes_);
  if (device) change(device_bytes_);
}

void TraceSummary::observe(const Record& record) {
  sequencer_.push(record);
  Record next;
  while (sequencer_.pop(next)) deliver(next);
}

void TraceSummary::keep(std::uint64_t seq, const Record& record) {
  kept_.insert_or_assign(seq, record);
  if (kept_.size() > kMaxKeptEvents) {
    auto middle = kept_.begin();
    std::advance(middle, kept_.size() / 2);
    kept_.erase(middle);
    ++droppable_;
  }
}

void TraceSummary::deliver(const Record& record) {
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, ProcessRecord>) {
          if (!process_) process_ = r;
        } else if constexpr (std::is_same_v<T, CompactionRecord>) {
          // A summary read back (a compacted file observed again): its
          // counts are where these continue.
          std::uint64_t done = compaction_.compactions;
          compaction_ = r;
          compaction_.compactions = std::max(done, r.compactions);
        } else if constexpr (std::is_same_v<T, StepSummaryRecord>) {
          steps_.push_back(r);
        } else if constexpr (requires { r.seq; }) {
          if (!saw_event_ && r.time_ns != 0) {
            saw_event_ = true;
            if (compaction_.first_time_ns == 0) compaction_.first_time_ns = r.time_ns;
          }
          compaction_.through_time_ns = std::max(compaction_.through_time_ns, r.time_ns);
          if constexpr (std::is_same_v<T, AllocRecord>) {
            ++compaction_.allocations;
            auto [it, added] = live_.try_emplace(Key{address_space(r.kind), r.address}, r);
            if (!added) {
              // The block came back without its free: the old one went.
              count(it->second, false);
              it->second = r;
              ++droppable_;
            }
            count(r, true);
            compaction_.peak_live_bytes = std::max(compaction_.peak_live_bytes, live_bytes());
          } else if constexpr (std::is_same_v<T, FreeRecord>) {
            ++compaction_.frees;
            ++droppable_;
            auto it = live_.find(Key{address_space(r.kind), r.address});
            if (it != live_.end()) {
              count(it->second, false);
              live_.erase(it);
              ++droppable_;  // its allocation
            }
          } else if constexpr (std::is_same_v<T, StepRecord>) {
            ++compaction_.steps;
            ++droppable_;
            if (++steps_since_kept_ >= step_resolution_) {
              steps_since_kept_ = 0;
              steps_.push_back(StepSummaryRecord{r.time_ns, r.step, r.source, r.clock, live_bytes(),
                                                 live_.size()});
              if (steps_.size() > kMaxStepPoints) {
                // Every other point goes: the resolution halves, the
                // history still spans the whole run.
                std::size_t kept = 0;
                for (std::size_t i = 0; i < steps_.size(); i += 2) steps_[kept++] = steps_[i];
                steps_.resize(kept);
                step_resolution_ *= 2;
              }
            }
          } else if constexpr (std::is_same_v<T, SampleRecord>) {
            auto key = std::make_pair(static_cast<std::uint8_t>(r.metric), r.device);
            if (samples_.count(key)) ++droppable_;
            samples_[key] = r;
          } else if constexpr (std::is_same_v<T, LostRecord>) {
            compaction_.lost_events += r.events;
            ++droppable_;
          } else {
            keep(r.seq, record);
          }
        } else {
          // A definition: kept whole, in the order it came.
          encode_record(record, definitions_);
          ++definition_count_;
        }
      },
      record);
}

bool TraceSummary::encode(const BlockSink& write_block, std::uint64_t bound_bytes) {
  // Events below the sequencer's next number are all delivered (or given up
  // on): the summary stands for them.
  CompactionRecord compaction = compaction_;
  compaction.through_seq = std::max(sequencer_.next_seq(), compaction_.through_seq);
  compaction.compactions += 1;
  compaction.bound_bytes = bound_bytes;
  compaction.step_resolution = step_resolution_;
  compaction.lost_events += sequencer_.findings().undeclared_skipped;
  compaction.dropped_events += droppable_;

  std::string block;
  std::uint32_t count = 0;
  bool ok = true;
  auto add = [&](const Record& record) {
    if (!ok) return;
    encode_record(record, block);
    ++count;
    if (block.size() >= kSummaryBlockBytes) {
      ok = write_block(block, count);
      block.clear();
      count = 0;
    }
  };
  if (process_) add(*process_);
  // Definitions were kept encoded: cut them into blocks at record ends.
  {
    const auto* cursor = reinterpret_cast<const std::uint8_t*>(definitions_.data());
    const auto* end = cursor + definitions_.size();
    while (ok && cursor < end) {
      const std::uint8_t* start = cursor;
      Record definition;
      if (decode_record(&cursor, end, definition) == DecodeStatus::kMalformed) break;
      block.append(reinterpret_cast<const char*>(start), static_cast<std::size_t>(cursor - start));
      ++count;
      if (block.size() >= kSummaryBlockBytes) {
        ok = write_block(block, count);
        block.clear();
        count = 0;
      }
    }
  }
  add(compaction);
  for (const StepSummaryRecord& step : steps_) add(step);
  // The kept events, in sequence order.
  std::vector<Record> owned;
  owned.reserve(live_.size() + samples_.size());
  for (const auto& entry : live_) owned.emplace_back(entry.second);
  for (const auto& entry : samples_) owned.emplace_back(entry.second);
  std::vector<std::pair<std::uint64_t, const Record*>> events;
  events.reserve(kept_.size() + owned.size());
  for (const auto& [seq, record] : kept_) events.emplace_back(seq, &record);
  for (const Record& record : owned) {
    std::uint64_t seq = 0;
    record_seq(record, &seq);
    events.emplace_back(seq, &record);
  }
  std::sort(events.begin(), events.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& event : events) add(*event.second);
  // Events that came before an earlier number still on its way: raw, after
  // the summary, where the reader expects events of the sequence.
  for (const Record& record : sequencer_.held_records()) add(record);
  if (ok && count > 0) ok = write_block(block, count);
  if (!ok) return false;

  // From here on, the summary describes this compaction too.
  compaction_.compactions = compaction.compactions;
  compaction_.dropped_events = compaction.dropped_events;
  compaction_.through_seq = compaction.through_seq;
  droppable_ = 0;
  return true;
}

}  // namespace gpuleak::trace
