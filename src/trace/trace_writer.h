// Writes a trace file: the header, then one compressed block per flush.
//
// The caller concatenates encoded records (codec.h) and hands them over as a
// block; each block goes to the file with a single write() so that a killed
// process leaves only whole blocks behind. Nothing here throws: failures are
// returned as false with a message, because the writer runs inside the
// traced program.
//
// Not thread-safe: one writer thread owns an instance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gpuleak::trace {

class TraceWriter {
 public:
  // Creates `path` (it must not exist) and writes the file header, of
  // format `version` (records.h: 1 for a trace that was never compacted).
  static std::unique_ptr<TraceWriter> create(const std::string& path, std::string* error,
                                             std::uint32_t version = 1);
  // Opens an existing trace to add blocks at its end (after checking its header).
  static std::unique_ptr<TraceWriter> append_to(const std::string& path, std::string* error);

  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Compresses `records` (record_count encoded records) into one block and
  // writes it. An empty `records` writes nothing. A block that cannot be
  // written whole (a full disk, the file size limit) fails, and the file is
  // left ending inside a block, so readers say the trace stops there; the
  // caller writes no more.
  bool write_block(std::string_view records, std::uint32_t record_count, std::string* error);

  std::uint64_t bytes_written() const { return bytes_written_; }
  const std::string& path() const { return path_; }

 private:
  TraceWriter(int fd, std::string path, std::uint64_t offset);
  void mark_cut(std::uint64_t size_limit);

  int fd_;
  std::string path_;
  std::uint64_t bytes_written_;
  struct Compressor;
  std::unique_ptr<Compressor> compressor_;
};

// Adds `records` (record_count encoded records) as one block at the end of
// the finished trace at `path` (TraceWriter::append_to checks its header).
// With no records the file is not opened. What the offline embedders
// (symbols, source lines) use to write what they worked out into the trace.
bool append_records(const std::string& path, std::string_view records, std::uint32_t record_count,
                    std::string* error);

}  // namespace gpuleak::trace
