// How events travel through a thread's buffer to the writer: as items the
// writer turns into trace records.
//
// Allocations and frees, the events of the program's hot path, travel as
// their record structs, copied; the writer encodes them, so the program's
// thread does not. Everything else (definitions, steps, annotations...)
// travels already encoded, with the number of records it holds.
//
//   encoded:  u8 kind=0 | u32 records | u32 bytes | bytes
//   alloc:    u8 kind=1 | trace::AllocRecord (its bytes in memory)
//   free:     u8 kind=2 | trace::FreeRecord
//
// Items never leave the process, so the layout is this build's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trace/records.h"

namespace gpuleak::collector {

constexpr std::size_t kEncodedItemHeaderBytes = 1 + 4 + 4;
constexpr std::size_t kAllocItemBytes = 1 + sizeof(trace::AllocRecord);
constexpr std::size_t kFreeItemBytes = 1 + sizeof(trace::FreeRecord);

// Each writes one item at `out` (which has room for it) and returns the end.
char* write_encoded_item(char* out, std::string_view encoded, std::uint32_t records);
char* write_alloc_item(char* out, const trace::AllocRecord& record);
char* write_free_item(char* out, const trace::FreeRecord& record);

// Appends the encoded records of the items in `items` to `out` and adds
// their number to `records`. Returns false if `items` does not hold whole,
// valid items (the rest is skipped).
bool translate_items(std::string_view items, std::string& out, std::uint32_t& records);

}  // namespace gpuleak::collector
