// What the fuzz targets share: turning fuzzer bytes into a trace file, and
// the in-memory file it is read from (a memfd opened by its /proc path, so
// the production API, which takes a path, is used unchanged and nothing
// touches the disk).
//
// Bytes that start with the file magic "GPULEAKT" are the trace file itself
// (fuzzing headers, framing, sizes, checksums); other bytes are a block
// payload (records as codec.h encodes them), cut into blocks and compressed
// with a checksum as the collector's writer does, so that mutations reach
// the record decoder, the sequencer and the analysis instead of failing
// zstd's checksum. `edit` (may be empty) may change each record of a payload
// that decodes before it is encoded again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "trace/records.h"

namespace gpuleak::fuzz {

[[noreturn]] void fail(const std::string& what);

std::string trace_file_from(const std::uint8_t* data, std::size_t size,
                            const std::function<void(trace::Record&)>& edit = {});

// Replaces the in-memory file's content; returns the path that opens it.
const std::string& memory_file_with(const std::string& bytes);

}  // namespace gpuleak::fuzz
