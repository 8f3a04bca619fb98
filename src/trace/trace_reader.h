// Streams the records of one trace file, block by block; it never loads the
// whole file. Errors (unreadable file, wrong format, truncated or corrupt
// block) are thrown as TraceError naming the file and the byte offset;
// every record before the problem has already been delivered, so callers can
// still report the readable prefix.
//
// In follow mode (used while the traced process is still writing), an
// incomplete block at the end is not an error: next() returns kPending and a
// later call continues from the same place.
//
// Records come in file order; use EventSequencer to get events in the order
// they happened.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace/records.h"

namespace gpuleak::trace {

class TraceError : public std::runtime_error {
 public:
  TraceError(const std::string& path, std::uint64_t offset, const std::string& what);
  const std::string& path() const { return path_; }
  std::uint64_t offset() const { return offset_; }

 private:
  std::string path_;
  std::uint64_t offset_;
};

class TraceReader {
 public:
  enum class Status { kRecord, kEnd, kPending };

  explicit TraceReader(std::string path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  Status next(Record& out);

  void set_follow(bool follow) { follow_ = follow; }
  const std::string& path() const { return path_; }
  // Bytes of the file consumed so far (whole blocks) and its size when last looked at.
  std::uint64_t offset() const { return offset_; }
  // Where the block of the record last returned starts.
  std::uint64_t block_offset() const { return current_block_offset_; }
  std::uint64_t file_bytes() const { return file_bytes_; }
  // Whether `path` now names another file than the one being read: the
  // collector compacted the trace (bounded_trace_writer.h) and renamed the
  // compacted file over it. What was read stays valid; the new file holds
  // it again as a summary, so a follower starts over on it.
  bool replaced() const;
  // Records of unknown types skipped (written by a newer gpuleak).
  std::uint64_t unknown_records() const { return unknown_records_; }

 private:
  // Loads the next block into block_. Returns kRecord when one is loaded.
  Status load_block();
  bool read_at(std::uint64_t offset, void* buffer, std::size_t size, std::size_t* got);
  [[noreturn]] void fail(std::uint64_t offset, const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  bool follow_ = false;
  std::uint64_t offset_ = 0;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t current_block_offset_ = 0;  // where the current block starts
  std::vector<std::uint8_t> compressed_;
  std::vector<std::uint8_t> block_;
  std::size_t cursor_ = 0;
  std::uint32_t block_records_expected_ = 0;
  std::uint32_t block_records_seen_ = 0;
  std::uint64_t unknown_records_ = 0;
  void* decompressor_ = nullptr;
};

}  // namespace gpuleak::trace
