// Temporary files and sample records shared by the trace tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "support/scratch_dir.h"
#include "trace/records.h"

namespace gpuleak::trace::testing {

// Scratch directories are the tests' shared one (tests/support).
using gpuleak::testing::ScratchDir;

// One record of every type, with every field set to a distinct value.
std::vector<Record> one_of_each_record();

// Writes `records` into a new trace at `path`, `per_block` records a block.
void write_trace(const std::string& path, const std::vector<Record>& records,
                 std::size_t per_block);

// Reads every record of a trace in file order (throws TraceError).
std::vector<Record> read_all(const std::string& path);

std::vector<std::uint8_t> file_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes);

}  // namespace gpuleak::trace::testing
