#include "fuzz_input.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "trace/codec.h"
#include "trace/file_layout.h"

namespace gpuleak::fuzz {

void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::abort();
}

namespace {

// Length of the record at data[0..size) by its framing (u8 type, varint
// length, body), or 0 when the framing runs past the end.
std::size_t framed_record_bytes(const std::uint8_t* data, std::size_t size) {
  std::size_t i = 1;
  std::uint64_t length = 0;
  for (int shift = 0; i < size && shift < 64; shift += 7) {
    std::uint8_t byte = data[i++];
    length |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      if (length > size - i) return 0;
      return i + static_cast<std::size_t>(length);
    }
  }
  return 0;
}

void append_block(std::string& file, const std::string& payload, std::uint32_t records) {
  static ZSTD_CCtx* context = [] {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    return c;
  }();
  std::string frame(ZSTD_compressBound(payload.size()), '\0');
  std::size_t n =
      ZSTD_compress2(context, frame.data(), frame.size(), payload.data(), payload.size());
  if (ZSTD_isError(n)) fail(std::string("zstd: ") + ZSTD_getErrorName(n));
  trace::BlockHeader header;
  header.compressed_bytes = static_cast<std::uint32_t>(n);
  header.raw_bytes = static_cast<std::uint32_t>(payload.size());
  header.record_count = records;
  std::uint8_t raw[trace::kBlockHeaderBytes];
  trace::encode_block_header(header, raw);
  file.append(reinterpret_cast<char*>(raw), sizeof raw);
  file.append(frame.data(), n);
}

}  // namespace

std::string trace_file_from(const std::uint8_t* data, std::size_t size,
                            const std::function<void(trace::Record&)>& edit) {
  if (size >= sizeof trace::kFileMagic &&
      std::memcmp(data, trace::kFileMagic, sizeof trace::kFileMagic) == 0) {
    return std::string(reinterpret_cast<const char*>(data), size);
  }
  std::string file(trace::kFileHeaderBytes, '\0');
  trace::encode_file_header(reinterpret_cast<std::uint8_t*>(file.data()));
  std::size_t per_block = 1 + size % 16;
  std::string payload;
  std::uint32_t records = 0;
  std::size_t at = 0;
  while (at < size) {
    std::size_t n = framed_record_bytes(data + at, size - at);
    if (n == 0) {  // broken framing: the rest is one more (malformed) record
      payload.append(reinterpret_cast<const char*>(data + at), size - at);
      ++records;
      break;
    }
    const std::uint8_t* cursor = data + at;
    trace::Record record;
    if (edit &&
        trace::decode_record(&cursor, data + at + n, record) == trace::DecodeStatus::kRecord &&
        cursor == data + at + n) {
      edit(record);
      trace::encode_record(record, payload);
    } else {
      payload.append(reinterpret_cast<const char*>(data + at), n);
    }
    at += n;
    if (++records == per_block) {
      append_block(file, payload, records);
      payload.clear();
      records = 0;
    }
  }
  if (!payload.empty()) append_block(file, payload, records);
  return file;
}

const std::string& memory_file_with(const std::string& bytes) {
  static int fd = [] {
    int made = ::memfd_create("gpuleak-fuzz-trace", 0);
    if (made < 0) fail("memfd_create failed");
    return made;
  }();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (::ftruncate(fd, 0) != 0) fail("ftruncate failed");
  if (::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
    fail("pwrite failed");
  return path;
}

}  // namespace gpuleak::fuzz
