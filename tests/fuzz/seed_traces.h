// Valid inputs for the trace reader fuzz target, generated at build time
// (nothing binary is committed): whole trace files, and bare record payloads
// that the target wraps into a trace itself (see trace_reader_fuzz.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trace/records.h"

namespace gpuleak::fuzz {

struct Seed {
  std::string name;
  std::string bytes;
};

// Concatenated encoded records (codec.h), as inside a block's payload.
std::string encode_payload(const std::vector<trace::Record>& records);

// A whole trace file: header, then blocks of `per_block` records.
std::string encode_trace_file(const std::vector<trace::Record>& records, std::size_t per_block);

// Every seed: every record kind, a training job that leaks (steps, samples,
// Python and native stacks, holder annotation, out-of-memory, events of two
// threads out of file order), a job without steps (time windows), unknown
// record types, symbols, an empty trace, and a truncated one.
std::vector<Seed> seeds();

}  // namespace gpuleak::fuzz
