// Symbols written into a finished trace, on the machine that ran the
// program: every native return address of the trace's stacks is resolved
// here (symbolizer.h) and appended to the trace as one block of
// SymbolRecords, so the trace reads the same on machines that lack these
// binaries or their debug files. `gpuleak run` does it right after the
// program exits (the second of the three times of work, docs/architecture.md).
//
// Not thread-safe; the trace must not be written by anyone else meanwhile.
#pragma once

#include <cstddef>
#include <string>

namespace gpuleak::symbolize {

// Reads `path` (trace/trace_feed.h: damage part-way ends reading, what came
// before counts), resolves every native address its stacks hold, and
// appends the ones that resolved to a function or a file. Returns true with
// the number of records written in `written` (0: nothing to add, the trace
// is left as it was); false with `error` when the trace cannot be read at
// all or the block cannot be written (a full disk).
bool embed_symbols(const std::string& path, std::size_t* written, std::string* error);

}  // namespace gpuleak::symbolize
