#include "trace/event_sequencer.h"

#include <algorithm>
#include <type_traits>

namespace gpuleak::trace {

namespace {

// Bounds on what a (possibly damaged) input can make the sequencer remember.
constexpr std::size_t kMaxDeclaredRanges = 1u << 20;
constexpr std::size_t kMaxSkippedKept = 4096;

}  // namespace

Record EventSequencer::to_record(HeldEvent&& event) {
  return std::visit([](auto&& e) -> Record { return std::forward<decltype(e)>(e); },
                    std::move(event));
}

void EventSequencer::note_lost(const LostRecord& lost) {
  if (lost.ranges.empty()) {
    // Written before ranges existed: `events` numbers below this record's
    // own will never come, but which ones is unknown.
    if (lost.events == 0) return;
    findings_.lost_events_counted += lost.events;
    counted_budget_ += lost.events;
    counted_below_ = std::max(counted_below_, lost.seq);
    return;
  }
  for (const SeqRange& range : lost.ranges) {
    if (range.count == 0) continue;
    std::uint64_t first = range.first_seq;
    std::uint64_t end = range.count > UINT64_MAX - first ? UINT64_MAX : first + range.count;
    if (end <= next_seq_) continue;  // already behind us
    if (declared_.size() >= kMaxDeclaredRanges) {
      // A damaged input with millions of ranges: count what does not fit.
      counted_budget_ += end - std::max(first, next_seq_);
      counted_below_ = std::max(counted_below_, end);
      continue;
    }
    // Merge with the ranges it touches.
    auto it = declared_.upper_bound(first);
    if (it != declared_.begin() && std::prev(it)->second >= first) {
      --it;
      first = it->first;
      end = std::max(end, it->second);
      it = declared_.erase(it);
    }
    while (it != declared_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = declared_.erase(it);
    }
    declared_.emplace(first, end);
  }
}

void EventSequencer::deliver_seq(std::uint64_t seq, std::uint64_t time_ns) {
  next_seq_ = seq + 1;
  if (time_ns) last_delivered_time_ns_ = time_ns;
  while (!declared_.empty() && declared_.begin()->second <= next_seq_)
    declared_.erase(declared_.begin());
}

void EventSequencer::skip_to(std::uint64_t until, bool undeclared) {
  if (!skipped_.empty() && skipped_.back().end == next_seq_ &&
      skipped_.back().undeclared == undeclared) {
    skipped_.back().end = until;
  } else {
    skipped_.push_back(Skipped{next_seq_, until, undeclared});
    if (skipped_.size() > kMaxSkippedKept) skipped_.pop_front();
  }
  next_seq_ = until;
  while (!declared_.empty() && declared_.begin()->second <= next_seq_)
    declared_.erase(declared_.begin());
}

const EventSequencer::Skipped* EventSequencer::skipped_at(std::uint64_t seq) const {
  // skipped_ is in increasing order: the last interval starting at or before seq.
  auto it =
      std::upper_bound(skipped_.begin(), skipped_.end(), seq,
                       [](std::uint64_t s, const Skipped& interval) { return s < interval.first; });
  if (it == skipped_.begin()) return nullptr;
  --it;
  return seq < it->end ? &*it : nullptr;
}

void EventSequencer::deliver_late(std::uint64_t seq) {
  ++findings_.late_events;
  // A number given up on without a lost record, that came after all, was
  // slow (an event held back by a long call), not missing.
  if (const Skipped* skipped = skipped_at(seq);
      skipped && skipped->undeclared && findings_.undeclared_skipped > 0)
    --findings_.undeclared_skipped;
}

void EventSequencer::hold(std::uint64_t seq, HeldEvent event) {
  std::uint32_t index;
  if (!free_slots_.empty()) {
    index = free_slots_.back();
    free_slots_.pop_back();
    slots_[index] = std::move(event);
  } else {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(std::move(event));
  }
  held_.push(Slot{seq, index});
}

std::vector<Record> EventSequencer::held_records() const {
  auto queue = held_;
  std::vector<Record> out;
  out.reserve(queue.size());
  while (!queue.empty()) {
    out.push_back(std::visit([](const auto& e) -> Record { return e; }, slots_[queue.top().index]));
    queue.pop();
  }
  return out;
}

void EventSequencer::push(Record record) {
  std::uint64_t seq = 0;
  if (!record_seq(record, &seq)) {
    if (const auto* compaction = std::get_if<CompactionRecord>(&record);
        compaction != nullptr && compaction->through_seq > compacted_below_) {
      compacted_below_ = compaction->through_seq;
      // Summarized numbers are neither lost nor missing: move past them
      // without counting them.
      if (next_seq_ < compacted_below_) skip_to(compacted_below_, false);
    }
    ready_.push_back(std::move(record));
    return;
  }
  if (seq < compacted_below_) {
    // An event the summary kept.
    ready_.push_back(std::move(record));
    return;
  }
  std::uint64_t time_ns = 0;
  record_time(record, &time_ns);
  latest_time_ns_ = std::max(latest_time_ns_, time_ns);
  if (const auto* lost = std::get_if<LostRecord>(&record)) note_lost(*lost);

  if (seq < next_seq_) {
    if (skipped_at(seq)) {
      deliver_late(seq);
      ready_.push_back(std::move(record));
    } else {
      if (findings_.repeated_events++ == 0) findings_.first_repeated_seq = seq;
    }
    return;
  }
  if (seq == next_seq_) {
    // In order: never held.
    deliver_seq(seq, time_ns);
    ready_.push_back(std::move(record));
    return;
  }
  std::visit(
      [&](auto&& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_constructible_v<HeldEvent, T&&> && requires { r.seq; }) {
          hold(seq, HeldEvent(std::forward<decltype(r)>(r)));
        }
      },
      std::move(record));
}

bool EventSequencer::pop(Record& out) {
  for (;;) {
    if (!ready_.empty()) {
      out = std::move(ready_.front());
      ready_.pop_front();
      return true;
    }
    if (held_.empty()) return false;
    Slot top = held_.top();
    if (top.seq <= next_seq_) {
      held_.pop();
      HeldEvent event = std::move(slots_[top.index]);
      free_slots_.push_back(top.index);
      if (held_.empty()) {
        // Everything held was delivered: give a burst's memory back.
        if (slots_.capacity() > 4096) {
          std::vector<HeldEvent>().swap(slots_);
          std::vector<std::uint32_t>().swap(free_slots_);
        } else {
          slots_.clear();
          free_slots_.clear();
        }
        held_ = decltype(held_)();
      }
      if (top.seq == next_seq_) {
        out = to_record(std::move(event));
        std::uint64_t time_ns = 0;
        record_time(out, &time_ns);
        deliver_seq(top.seq, time_ns);
        return true;
      }
      // Held twice, or held and then given up on.
      if (skipped_at(top.seq)) {
        deliver_late(top.seq);
        out = to_record(std::move(event));
        return true;
      }
      if (findings_.repeated_events++ == 0) findings_.first_repeated_seq = top.seq;
      continue;
    }
    // A gap [next_seq_, top.seq): declared lost, counted lost, or unknown.
    auto declared = declared_.upper_bound(next_seq_);
    if (declared != declared_.begin() && std::prev(declared)->second > next_seq_) {
      std::uint64_t until = std::min(std::prev(declared)->second, top.seq);
      findings_.declared_skipped += until - next_seq_;
      skip_to(until, false);
      continue;
    }
    if (counted_budget_ > 0 && next_seq_ < counted_below_) {
      std::uint64_t until = std::min(top.seq, counted_below_);
      if (until - next_seq_ > counted_budget_) until = next_seq_ + counted_budget_;
      counted_budget_ -= until - next_seq_;
      findings_.counted_skipped += until - next_seq_;
      skip_to(until, false);
      continue;
    }
    // Give up at max_pending_ held, not one past it: the held events'
    // vectors then stop at a power of two instead of doubling once more.
    if (!finished_ && held_.size() < max_pending_) return false;
    if (findings_.gaps.size() < SequenceFindings::kMaxGapsKept) {
      findings_.gaps.push_back(SequenceGap{next_seq_, top.seq - next_seq_, finished_,
                                           last_delivered_time_ns_, latest_time_ns_});
    }
    findings_.undeclared_skipped += top.seq - next_seq_;
    skip_to(top.seq, true);
  }
}

}  // namespace gpuleak::trace
