#include "trace/event_sequencer.h"

namespace gpuleak::trace {

void EventSequencer::push(Record record) {
  std::uint64_t seq = 0;
  if (!record_seq(record, &seq)) {
    ready_.push_back(std::move(record));
    return;
  }
  held_.push(Held{seq, std::move(record)});
}

bool EventSequencer::pop(Record& out) {
  if (!ready_.empty()) {
    out = std::move(ready_.front());
    ready_.pop_front();
    return true;
  }
  if (held_.empty()) return false;
  std::uint64_t seq = held_.top().seq;
  if (seq < next_seq_) {
    // A duplicate or a seq from before a skipped gap: deliver it anyway,
    // in its place, rather than dropping data.
  } else if (seq > next_seq_) {
    if (!finished_ && held_.size() <= max_pending_) return false;
    skipped_events_ += seq - next_seq_;
  }
  out = std::move(const_cast<Held&>(held_.top()).record);
  held_.pop();
  if (seq >= next_seq_) next_seq_ = seq + 1;
  return true;
}

}  // namespace gpuleak::trace
