// Encoding and decoding of single records (the body layout of records.h).
//
// Each record struct's fields are listed once, in codec.cpp, and both
// directions walk that list, so they cannot drift apart.
//
// Thread-safe: no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/records.h"

namespace gpuleak::trace {

// Appends `u8 type | varint length | body` for `record` to `out`.
void encode_record(const Record& record, std::string& out);

// The collector's hot path encodes events into a caller-provided buffer
// without allocating. kMaxEventBytes bounds every AllocRecord, FreeRecord,
// StepRecord and SampleRecord.
inline constexpr std::size_t kMaxEventBytes = 128;
std::size_t encode_alloc(const AllocRecord& record, std::uint8_t* out);
std::size_t encode_free(const FreeRecord& record, std::uint8_t* out);

enum class DecodeStatus {
  kRecord,     // `out` holds a record
  kUnknown,    // a record type this version does not know; skipped
  kMalformed,  // the bytes do not form a record
};

// Decodes the record at `*cursor` (which must be < end) and advances
// `*cursor` past it (also for kUnknown). On kMalformed, `*cursor` is unchanged.
DecodeStatus decode_record(const std::uint8_t** cursor, const std::uint8_t* end, Record& out);

}  // namespace gpuleak::trace
