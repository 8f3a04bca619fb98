// The one loop that reads a trace for everything that consumes it: the
// analysis of a finished trace (`gpuleak report`), `gpuleak run`'s live
// watch of traces still being written, and symbol embedding after a run.
// Records are read in file order, checked for damage (trace_damage.h) and
// handed out in the order they happened (event_sequencer.h).
//
// Errors: a file that cannot be opened or is not a gpuleak trace throws
// TraceError from read(). Damage part-way (a corrupt or truncated block,
// another process's trace appended) ends reading: error() holds it, and
// every record before it has been handed out.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trace/event_sequencer.h"
#include "trace/records.h"
#include "trace/trace_damage.h"
#include "trace/trace_reader.h"

namespace gpuleak::trace {

class TraceFeed {
 public:
  using Consumer = std::function<void(const Record& record)>;
  using Progress = std::function<void(std::uint64_t bytes_done, std::uint64_t bytes_total)>;

  // `follow`: the file is still being written; read() stops where it ends
  // and a later read() continues from there (TraceReader's follow mode).
  explicit TraceFeed(std::string path, bool follow = false);
  ~TraceFeed();
  TraceFeed(const TraceFeed&) = delete;
  TraceFeed& operator=(const TraceFeed&) = delete;

  // Reads what the file holds now and hands every record that is due to
  // `consume`. Opens the file on the first call; when that throws (a file
  // whose header is not written yet, in follow mode), a later call tries
  // again. Does nothing once error() is set.
  void read(const Consumer& consume, const Progress& progress = {});

  // The trace has ended: hands out the records the sequencer still holds.
  // Throws TraceError when the trace held no record at all and nothing
  // stopped reading (a process that ended before its first flush).
  void finish(const Consumer& consume);

  bool opened() const { return reader_ != nullptr; }
  // The file was compacted and replaced (TraceReader::replaced): a follower
  // reads it again from the start with a new feed.
  bool replaced() const { return reader_ != nullptr && reader_->replaced(); }
  const std::optional<TraceError>& error() const { return error_; }
  // What is wrong with a trace that still read, after finish(): sentences
  // for people (DamageDetector::judge).
  std::vector<std::string> damage() const;
  // What the sequencer found: lost sequence numbers listed or only counted.
  const SequenceFindings& findings() const { return sequencer_.findings(); }

 private:
  std::string path_;
  bool follow_;
  std::unique_ptr<TraceReader> reader_;
  EventSequencer sequencer_;
  DamageDetector damage_;
  std::optional<TraceError> error_;
  std::uint64_t records_read_ = 0;
};

// Reads the whole trace at `path` into `consume` (read(), then finish()), for
// the passes after a run that only collect definitions. False, with the
// TraceError's text in *error, when it cannot be read at all; damage
// part-way ends it quietly after the records before it, as read() does.
bool read_whole_trace(const std::string& path, const TraceFeed::Consumer& consume,
                      std::string* error);

}  // namespace gpuleak::trace
