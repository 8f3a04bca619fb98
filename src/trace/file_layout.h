// Fixed-size headers of the trace file (see records.h for the layout).
// Internal to src/trace.
#pragma once

#include <cstdint>
#include <string>

#include "trace/records.h"

namespace gpuleak::trace {

struct BlockHeader {
  std::uint32_t compressed_bytes = 0;
  std::uint32_t raw_bytes = 0;
  std::uint32_t record_count = 0;
};

// Writes magic, `version` and kFileHeaderBytes into 32 bytes.
void encode_file_header(std::uint8_t* out, std::uint32_t version = kUncompactedFormatVersion);
// Checks magic and version (kOldestFormatVersion to kFormatVersion); on
// failure says why in `problem`.
bool check_file_header(const std::uint8_t* in, std::string* problem,
                       std::uint32_t* version = nullptr);

void encode_block_header(const BlockHeader& header, std::uint8_t* out);
// Returns false if the magic is wrong.
bool decode_block_header(const std::uint8_t* in, BlockHeader* header);

}  // namespace gpuleak::trace
