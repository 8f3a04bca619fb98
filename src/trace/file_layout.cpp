#include "trace/file_layout.h"

#include <cstring>

#include "trace/records.h"

namespace gpuleak::trace {

namespace {

void put_u32(std::uint8_t* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint32_t get_u32(const std::uint8_t* in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in[i]) << (8 * i);
  return v;
}

}  // namespace

void encode_file_header(std::uint8_t* out, std::uint32_t version) {
  std::memset(out, 0, kFileHeaderBytes);
  std::memcpy(out, kFileMagic, sizeof kFileMagic);
  put_u32(out + 8, version);
  put_u32(out + 12, kFileHeaderBytes);
}

bool check_file_header(const std::uint8_t* in, std::string* problem, std::uint32_t* version) {
  if (std::memcmp(in, kFileMagic, sizeof kFileMagic) != 0) {
    *problem = "not a gpuleak trace (wrong magic bytes at offset 0)";
    return false;
  }
  std::uint32_t found = get_u32(in + 8);
  if (version) *version = found;
  if (found > kFormatVersion) {
    *problem = "trace format version " + std::to_string(found) +
               " is newer than this gpuleak reads (version " +
               std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) +
               "); use a newer gpuleak";
    return false;
  }
  if (found < kOldestFormatVersion) {
    *problem = "trace format version " + std::to_string(found) +
               " is older than this gpuleak reads (version " +
               std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) +
               "); report it with the gpuleak that recorded it";
    return false;
  }
  if (get_u32(in + 12) != kFileHeaderBytes) {
    *problem = "file header size field is " + std::to_string(get_u32(in + 12)) + ", expected " +
               std::to_string(kFileHeaderBytes);
    return false;
  }
  return true;
}

void encode_block_header(const BlockHeader& header, std::uint8_t* out) {
  put_u32(out, kBlockMagic);
  put_u32(out + 4, header.compressed_bytes);
  put_u32(out + 8, header.raw_bytes);
  put_u32(out + 12, header.record_count);
}

bool decode_block_header(const std::uint8_t* in, BlockHeader* header) {
  if (get_u32(in) != kBlockMagic) return false;
  header->compressed_bytes = get_u32(in + 4);
  header->raw_bytes = get_u32(in + 8);
  header->record_count = get_u32(in + 12);
  return true;
}

}  // namespace gpuleak::trace
