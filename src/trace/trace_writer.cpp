#include "trace/trace_writer.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "trace/file_layout.h"
#include "trace/records.h"

namespace gpuleak::trace {

namespace {

bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

struct TraceWriter::Compressor {
  ZSTD_CCtx* context = nullptr;
  std::vector<char> block;
  Compressor() {
    context = ZSTD_createCCtx();
    if (context) {
      // Level 1: the writer thread must keep up with a training job.
      ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 1);
      ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
    }
  }
  ~Compressor() { ZSTD_freeCCtx(context); }
};

TraceWriter::TraceWriter(int fd, std::string path, std::uint64_t offset)
    : fd_(fd),
      path_(std::move(path)),
      bytes_written_(offset),
      compressor_(std::make_unique<Compressor>()) {}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, std::string* error,
                                                 std::uint32_t version) {
  // 0600: a trace holds the command line (passwords in arguments, too), the
  // environment's paths and the program's source lines (docs/security.md).
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = errno_text("cannot create trace", path);
    return nullptr;
  }
  std::uint8_t header[kFileHeaderBytes];
  encode_file_header(header, version);
  if (!write_all(fd, header, sizeof header)) {
    *error = errno_text("cannot write trace", path);
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(fd, path, sizeof header));
  if (!writer->compressor_->context) {
    *error = "cannot create a zstd compression context";
    return nullptr;
  }
  return writer;
}

std::unique_ptr<TraceWriter> TraceWriter::append_to(const std::string& path, std::string* error) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *error = errno_text("cannot open trace", path);
    return nullptr;
  }
  std::uint8_t header[kFileHeaderBytes];
  ssize_t n = ::pread(fd, header, sizeof header, 0);
  std::string problem;
  if (n != static_cast<ssize_t>(sizeof header) || !check_file_header(header, &problem)) {
    *error =
        "cannot append to " + path + ": " + (problem.empty() ? "not a gpuleak trace" : problem);
    ::close(fd);
    return nullptr;
  }
  off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) {
    *error = errno_text("cannot seek in trace", path);
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(fd, path, static_cast<std::uint64_t>(end)));
  if (!writer->compressor_->context) {
    *error = "cannot create a zstd compression context";
    return nullptr;
  }
  return writer;
}

bool TraceWriter::write_block(std::string_view records, std::uint32_t record_count,
                              std::string* error) {
  if (records.empty()) return true;
  if (records.size() > kMaxBlockBytes) {
    *error = "block too large";
    return false;
  }
  Compressor& c = *compressor_;
  std::size_t bound = ZSTD_compressBound(records.size());
  c.block.resize(kBlockHeaderBytes + bound);
  std::size_t compressed = ZSTD_compress2(c.context, c.block.data() + kBlockHeaderBytes, bound,
                                          records.data(), records.size());
  if (ZSTD_isError(compressed)) {
    *error = std::string("zstd: ") + ZSTD_getErrorName(compressed);
    return false;
  }
  BlockHeader header;
  header.compressed_bytes = static_cast<std::uint32_t>(compressed);
  header.raw_bytes = static_cast<std::uint32_t>(records.size());
  header.record_count = record_count;
  encode_block_header(header, reinterpret_cast<std::uint8_t*>(c.block.data()));
  std::size_t total = kBlockHeaderBytes + compressed;
  // Past the file size limit (ulimit -f) the kernel would send SIGXFSZ,
  // which ends the process: the traced program must never die of that.
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      bytes_written_ + total > limit.rlim_cur) {
    *error = "cannot write trace " + path_ + ": it would pass the file size limit (ulimit -f) of " +
             std::to_string(limit.rlim_cur) + " bytes";
    mark_cut(limit.rlim_cur);
    return false;
  }
  if (!write_all(fd_, c.block.data(), total)) {
    *error = errno_text("cannot write trace", path_);
    mark_cut(limit.rlim_cur);
    return false;
  }
  bytes_written_ += total;
  return true;
}

void TraceWriter::mark_cut(std::uint64_t size_limit) {
  off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) return;
  // Part of the block reached the file: readers see a cut block already.
  if (static_cast<std::uint64_t>(end) != bytes_written_) return;
  // Else one more byte, made by extending the file (a hole: it needs no free
  // space), so the file ends inside a block header and every reader says the
  // trace stops there instead of taking it for a whole one.
  if (static_cast<std::uint64_t>(end) + 1 > size_limit) return;
  int saved = errno;
  if (::ftruncate(fd_, end + 1) != 0) errno = saved;
}

bool append_records(const std::string& path, std::string_view records, std::uint32_t record_count,
                    std::string* error) {
  if (record_count == 0) return true;
  auto writer = TraceWriter::append_to(path, error);
  return writer && writer->write_block(records, record_count, error);
}

}  // namespace gpuleak::trace
