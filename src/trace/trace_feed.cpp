#include "trace/trace_feed.h"

namespace gpuleak::trace {

TraceFeed::TraceFeed(std::string path, bool follow) : path_(std::move(path)), follow_(follow) {}

TraceFeed::~TraceFeed() = default;

void TraceFeed::read(const Consumer& consume, const Progress& progress) {
  if (error_) return;
  if (!reader_) {
    auto reader = std::make_unique<TraceReader>(path_);  // throws when unusable from the start
    reader->set_follow(follow_);
    reader_ = std::move(reader);
  }
  Record record;
  try {
    while (reader_->next(record) == TraceReader::Status::kRecord) {
      if (!damage_.observe(record)) {
        const ProcessRecord& other = *damage_.foreign_process();
        std::uint64_t block_offset = reader_->block_offset();
        error_ = TraceError(
            path_, block_offset,
            "the trace of another process (pid " + std::to_string(other.pid) +
                ") begins in the block at byte " + std::to_string(block_offset) +
                ": another trace was appended to this one; the records before it are readable");
        break;
      }
      sequencer_.push(std::move(record));
      while (sequencer_.pop(record)) consume(record);
      if (progress && (++records_read_ & 0xffff) == 0)
        progress(reader_->offset(), reader_->file_bytes());
    }
  } catch (const TraceError& e) {
    error_ = e;
  }
  if (progress) progress(reader_->offset(), reader_->file_bytes());
}

void TraceFeed::finish(const Consumer& consume) {
  sequencer_.finish();
  Record record;
  while (sequencer_.pop(record)) consume(record);
  if (!error_ && !damage_.saw_records()) {
    throw TraceError(path_, reader_ ? reader_->offset() : 0,
                     "holds only the trace header, no records: the process stopped "
                     "before its first flush, or the file was cut after its header");
  }
}

std::vector<std::string> TraceFeed::damage() const {
  return damage_.judge(sequencer_.findings(), error_.has_value());
}

bool read_whole_trace(const std::string& path, const TraceFeed::Consumer& consume,
                      std::string* error) {
  TraceFeed feed(path);
  try {
    feed.read(consume);
    feed.finish(consume);
  } catch (const TraceError& e) {
    *error = e.what();
    return false;
  }
  return true;
}

}  // namespace gpuleak::trace
