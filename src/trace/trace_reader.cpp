#include "trace/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>

#include "trace/codec.h"
#include "trace/file_layout.h"

namespace gpuleak::trace {

TraceError::TraceError(const std::string& path, std::uint64_t offset, const std::string& what)
    : std::runtime_error(path + ": " + what), path_(path), offset_(offset) {}

TraceReader::TraceReader(std::string path) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
  // below); on a regular file the flag changes nothing.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw TraceError(path_, 0, std::string("cannot open: ") + std::strerror(errno));
  // Each refusal closes the file first: the destructor does not run when the
  // constructor throws, and callers open again and again (gpuleak run retries
  // a trace until its header has been written).
  auto refuse = [this](const std::string& what) {
    ::close(fd_);
    fd_ = -1;
    fail(0, what);
  };
  struct stat st {};
  if (::fstat(fd_, &st) != 0) refuse(std::string("cannot read: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) refuse("is a directory, not a trace file");
  // A FIFO, socket or device could block or never end; traces are files.
  if (!S_ISREG(st.st_mode)) refuse("is not a regular file (a FIFO, socket or device), not a trace");
  std::uint8_t header[kFileHeaderBytes];
  std::size_t got = 0;
  if (!read_at(0, header, sizeof header, &got))
    refuse(std::string("cannot read: ") + std::strerror(errno));
  if (got < sizeof header) {
    refuse("file is " + std::to_string(got) + " bytes, shorter than the " +
           std::to_string(kFileHeaderBytes) + "-byte trace header");
  }
  std::string problem;
  if (!check_file_header(header, &problem)) refuse(problem);
  decompressor_ = ZSTD_createDCtx();
  if (!decompressor_) refuse("cannot create a zstd decompression context");
  offset_ = kFileHeaderBytes;
}

TraceReader::~TraceReader() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(decompressor_));
}

void TraceReader::fail(std::uint64_t offset, const std::string& what) const {
  throw TraceError(path_, offset, what);
}

bool TraceReader::read_at(std::uint64_t offset, void* buffer, std::size_t size, std::size_t* got) {
  *got = 0;
  auto* p = static_cast<char*>(buffer);
  while (*got < size) {
    ssize_t n = ::pread(fd_, p + *got, size - *got, static_cast<off_t>(offset + *got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    *got += static_cast<std::size_t>(n);
  }
  return true;
}

bool TraceReader::replaced() const {
  struct stat now {
  }, open_file{};
  if (fd_ < 0 || ::fstat(fd_, &open_file) != 0) return false;
  if (::stat(path_.c_str(), &now) != 0) return false;
  return now.st_ino != open_file.st_ino || now.st_dev != open_file.st_dev;
}

TraceReader::Status TraceReader::load_block() {
  struct stat st {};
  if (::fstat(fd_, &st) == 0) file_bytes_ = static_cast<std::uint64_t>(st.st_size);

  std::uint8_t raw_header[kBlockHeaderBytes];
  std::size_t got = 0;
  if (!read_at(offset_, raw_header, sizeof raw_header, &got)) {
    fail(offset_, std::string("cannot read: ") + std::strerror(errno));
  }
  if (got == 0) return follow_ ? Status::kPending : Status::kEnd;
  if (got < sizeof raw_header) {
    if (follow_) return Status::kPending;
    if (got == 1 && raw_header[0] == 0) {
      // What the writer leaves when a block could not be written at all.
      fail(offset_, "the trace stops at byte " + std::to_string(offset_) +
                        ": the collector could not write more (a full disk or the file size "
                        "limit), or the file was cut there; the records before it are readable");
    }
    fail(offset_, "truncated block header at byte " + std::to_string(offset_) + " (" +
                      std::to_string(got) + " of " + std::to_string(kBlockHeaderBytes) +
                      " bytes present); the records before it are readable");
  }
  BlockHeader header;
  if (!decode_block_header(raw_header, &header)) {
    fail(offset_, "corrupt block header at byte " + std::to_string(offset_) +
                      " (wrong magic); the records before it are readable");
  }
  if (header.compressed_bytes == 0 || header.compressed_bytes > kMaxBlockBytes ||
      header.raw_bytes > kMaxBlockBytes) {
    fail(offset_, "corrupt block header at byte " + std::to_string(offset_) +
                      " (implausible sizes); the records before it are readable");
  }
  compressed_.resize(header.compressed_bytes);
  std::uint64_t payload_offset = offset_ + kBlockHeaderBytes;
  if (!read_at(payload_offset, compressed_.data(), compressed_.size(), &got)) {
    fail(offset_, std::string("cannot read: ") + std::strerror(errno));
  }
  if (got < compressed_.size()) {
    if (follow_) return Status::kPending;
    fail(offset_, "truncated block at byte " + std::to_string(offset_) + ": it needs " +
                      std::to_string(header.compressed_bytes) + " bytes, the file ends after " +
                      std::to_string(got) + "; the records before it are readable");
  }
  block_.resize(header.raw_bytes);
  std::size_t produced = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(decompressor_), block_.data(),
                                             block_.size(), compressed_.data(), compressed_.size());
  if (ZSTD_isError(produced) || produced != header.raw_bytes) {
    std::string why = ZSTD_isError(produced) ? ZSTD_getErrorName(produced) : "size mismatch";
    fail(offset_, "corrupt block at byte " + std::to_string(offset_) + " (" + why +
                      "); the records before it are readable");
  }
  current_block_offset_ = offset_;
  offset_ = payload_offset + header.compressed_bytes;
  cursor_ = 0;
  block_records_expected_ = header.record_count;
  block_records_seen_ = 0;
  return Status::kRecord;
}

TraceReader::Status TraceReader::next(Record& out) {
  while (true) {
    if (cursor_ >= block_.size()) {
      if (block_records_seen_ != block_records_expected_) {
        fail(current_block_offset_, "corrupt block at byte " +
                                        std::to_string(current_block_offset_) + ": header says " +
                                        std::to_string(block_records_expected_) +
                                        " records, found " + std::to_string(block_records_seen_));
      }
      block_.clear();
      cursor_ = 0;
      block_records_expected_ = block_records_seen_ = 0;
      Status status = load_block();
      if (status != Status::kRecord) return status;
      continue;
    }
    const std::uint8_t* begin = block_.data() + cursor_;
    const std::uint8_t* p = begin;
    DecodeStatus status = decode_record(&p, block_.data() + block_.size(), out);
    if (status == DecodeStatus::kMalformed) {
      fail(current_block_offset_,
           "corrupt record " + std::to_string(block_records_seen_ + 1) + " in the block at byte " +
               std::to_string(current_block_offset_) + "; the records before it are readable");
    }
    cursor_ += static_cast<std::size_t>(p - begin);
    ++block_records_seen_;
    if (status == DecodeStatus::kUnknown) {
      ++unknown_records_;
      continue;
    }
    return Status::kRecord;
  }
}

}  // namespace gpuleak::trace
