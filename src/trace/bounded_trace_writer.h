// A trace writer that keeps its file under a size bound, for jobs that run
// for days: when the file passes half the bound, it is rewritten as a
// summary of everything so far (trace_summary.h) and the raw events go on
// after it (docs/trace-format.md, "Compaction").
//
// The bound holds at every moment, compaction included: a block is written
// only while the file stays under 3/4 of the bound, a summary must fit in
// 1/4 of it, and the old file and the summary being written are never more
// than the bound together. The summary goes to `<path>.compacting` and is
// renamed over `<path>` (atomic: a reader sees the old trace or the new one,
// never half of one). A failure of any kind leaves the trace as it was and
// returns false with a sentence; the caller writes no more.
//
// Without a bound it is a TraceWriter that also observes nothing.
//
// Not thread-safe: one writer thread owns an instance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "trace/trace_summary.h"
#include "trace/trace_writer.h"

namespace gpuleak::trace {

class BoundedTraceWriter {
 public:
  // The smallest bound accepted: a block of the collector (8 MiB raw, a few
  // MiB compressed) must fit in a quarter of it.
  static constexpr std::uint64_t kMinBoundBytes = 16ull << 20;

  // Creates `path` as TraceWriter::create does. `bound_bytes` 0: no bound;
  // else at least kMinBoundBytes.
  static std::unique_ptr<BoundedTraceWriter> create(const std::string& path,
                                                    std::uint64_t bound_bytes, std::string* error);

  bool write_block(std::string_view records, std::uint32_t record_count, std::string* error);

  // After write_block failed because the bound could not be kept (not
  // because the disk refused a write): the file is whole, and one small
  // block more says why the trace stops (a `collector_disabled`
  // annotation). Writes past the bound's checks.
  bool stopped_by_bound() const { return stopped_by_bound_; }
  bool write_last_block(std::string_view records, std::uint32_t record_count, std::string* error) {
    return writer_->write_block(records, record_count, error);
  }

  const std::string& path() const { return path_; }
  std::uint64_t bound_bytes() const { return bound_bytes_; }
  // The size of the file now.
  std::uint64_t bytes_written() const { return writer_->bytes_written(); }

  // What compaction cost, for the collector's verbose line and the bench.
  struct Stats {
    std::uint64_t compactions = 0;
    std::uint64_t last_summary_bytes = 0;
    std::uint64_t last_compaction_ns = 0;
    std::uint64_t longest_compaction_ns = 0;
    std::uint64_t observe_ns = 0;  // decoding written blocks into the summary, all together
  };
  const Stats& stats() const { return stats_; }

 private:
  BoundedTraceWriter(std::unique_ptr<TraceWriter> writer, std::string path,
                     std::uint64_t bound_bytes);
  bool observe(std::string_view records, std::string* error);
  bool compact(std::string* error);

  std::unique_ptr<TraceWriter> writer_;
  std::string path_;
  std::uint64_t bound_bytes_;
  TraceSummary summary_;
  Stats stats_;
  bool stopped_by_bound_ = false;
};

}  // namespace gpuleak::trace
