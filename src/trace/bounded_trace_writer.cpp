#include "trace/bounded_trace_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "trace/codec.h"

namespace gpuleak::trace {

namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

BoundedTraceWriter::BoundedTraceWriter(std::unique_ptr<TraceWriter> writer, std::string path,
                                       std::uint64_t bound_bytes)
    : writer_(std::move(writer)), path_(std::move(path)), bound_bytes_(bound_bytes) {}

std::unique_ptr<BoundedTraceWriter> BoundedTraceWriter::create(const std::string& path,
                                                               std::uint64_t bound_bytes,
                                                               std::string* error) {
  if (bound_bytes != 0 && bound_bytes < kMinBoundBytes) {
    *error = "the trace bound of " + std::to_string(bound_bytes) + " bytes is below the least, " +
             std::to_string(kMinBoundBytes);
    return nullptr;
  }
  auto writer = TraceWriter::create(path, error);
  if (!writer) return nullptr;
  return std::unique_ptr<BoundedTraceWriter>(
      new BoundedTraceWriter(std::move(writer), path, bound_bytes));
}

bool BoundedTraceWriter::observe(std::string_view records, std::string* error) {
  std::uint64_t start = steady_ns();
  const auto* cursor = reinterpret_cast<const std::uint8_t*>(records.data());
  const auto* end = cursor + records.size();
  Record record;
  while (cursor < end) {
    DecodeStatus status = decode_record(&cursor, end, record);
    if (status == DecodeStatus::kMalformed) {
      *error = "internal error: a block of the trace did not decode for its summary";
      return false;
    }
    if (status == DecodeStatus::kRecord) summary_.observe(record);
  }
  stats_.observe_ns += steady_ns() - start;
  return true;
}

bool BoundedTraceWriter::write_block(std::string_view records, std::uint32_t record_count,
                                     std::string* error) {
  if (bound_bytes_ == 0) return writer_->write_block(records, record_count, error);
  if (records.empty()) return true;
  // The block is compressed before its size is known; the raw size bounds
  // it (zstd's worst case adds a little, covered by the quarter's margin).
  std::uint64_t before = writer_->bytes_written();
  if (!writer_->write_block(records, record_count, error)) return false;
  if (writer_->bytes_written() > bound_bytes_ / 4 * 3) {
    // Written already, so the file may pass 3/4 of the bound by one block:
    // stop here, before compaction can add its summary on top.
    *error = "cannot keep the trace " + path_ + " under its bound of " + mib(bound_bytes_) +
             ": one block took it from " + mib(before) + " to " + mib(writer_->bytes_written()) +
             " (GPULEAK_TRACE_MAX_BYTES)";
    stopped_by_bound_ = true;
    return false;
  }
  if (!observe(records, error)) return false;
  if (writer_->bytes_written() > bound_bytes_ / 2) return compact(error);
  return true;
}

bool BoundedTraceWriter::compact(std::string* error) {
  std::uint64_t start = steady_ns();
  std::string temporary = path_ + ".compacting";
  // Left by a process that died while compacting: it was never the trace.
  ::unlink(temporary.c_str());
  std::unique_ptr<TraceWriter> next = TraceWriter::create(temporary, error, kFormatVersion);
  if (!next) return false;
  std::uint64_t summary_limit = bound_bytes_ / 4;
  bool too_large = false;
  bool written = summary_.encode(
      [&](std::string_view block, std::uint32_t count) {
        if (!next->write_block(block, count, error)) return false;
        if (next->bytes_written() > summary_limit) {
          too_large = true;
          return false;
        }
        return true;
      },
      bound_bytes_);
  if (!written) {
    if (too_large) {
      *error = "cannot keep the trace " + path_ + " under its bound of " + mib(bound_bytes_) +
               ": its summary (" + std::to_string(summary_.live_allocations()) +
               " live allocations and every stack) passed a quarter of it; raise "
               "GPULEAK_TRACE_MAX_BYTES";
    }
    // The trace itself is untouched: it can still say why it stops.
    stopped_by_bound_ = true;
    ::unlink(temporary.c_str());
    return false;
  }
  if (::rename(temporary.c_str(), path_.c_str()) != 0) {
    *error = "cannot replace " + path_ + " by its compacted trace: " + std::strerror(errno);
    stopped_by_bound_ = true;
    ::unlink(temporary.c_str());
    return false;
  }
  stats_.last_summary_bytes = next->bytes_written();
  writer_ = std::move(next);
  stats_.compactions += 1;
  stats_.last_compaction_ns = steady_ns() - start;
  stats_.longest_compaction_ns = std::max(stats_.longest_compaction_ns, stats_.last_compaction_ns);
  return true;
}

}  // namespace gpuleak::trace
