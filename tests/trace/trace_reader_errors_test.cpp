#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "trace/records.h"
#include "trace/trace_reader.h"
#include "trace/trace_test_files.h"

namespace gpuleak::trace {
namespace {

using testing::ScratchDir;

std::vector<Record> steps(std::size_t n) {
  std::vector<Record> r;
  for (std::size_t i = 0; i < n; ++i) r.push_back(StepRecord{i, i * 10, i, StepSource::kExplicit});
  return r;
}

// Reads until an error; returns the records read before it and the error.
struct Outcome {
  std::vector<Record> records;
  bool failed = false;
  std::string message;
  std::uint64_t offset = 0;
};
Outcome read_until_error(const std::string& path) {
  Outcome out;
  try {
    TraceReader reader(path);
    Record r;
    while (reader.next(r) == TraceReader::Status::kRecord) out.records.push_back(r);
  } catch (const TraceError& e) {
    out.failed = true;
    out.message = e.what();
    out.offset = e.offset();
  }
  return out;
}

TEST(TraceReaderErrors, missing_file_names_the_file) {
  Outcome o = read_until_error("/nonexistent/dir/x.trace");
  ASSERT_TRUE(o.failed);
  EXPECT_NE(o.message.find("/nonexistent/dir/x.trace"), std::string::npos);
  EXPECT_NE(o.message.find("No such file"), std::string::npos);
}

TEST(TraceReaderErrors, not_a_trace_is_refused_at_offset_zero) {
  ScratchDir dir;
  testing::write_bytes(dir.file("x"), std::vector<std::uint8_t>(100, 'a'));
  Outcome o = read_until_error(dir.file("x"));
  ASSERT_TRUE(o.failed);
  EXPECT_EQ(o.offset, 0u);
  EXPECT_NE(o.message.find("not a gpuleak trace"), std::string::npos);
}

TEST(TraceReaderErrors, short_file_reports_its_size) {
  ScratchDir dir;
  testing::write_bytes(dir.file("x"), {'G', 'P', 'U'});
  Outcome o = read_until_error(dir.file("x"));
  ASSERT_TRUE(o.failed);
  EXPECT_NE(o.message.find("3 bytes"), std::string::npos);
}

TEST(TraceReaderErrors, newer_format_version_is_refused_with_advice) {
  ScratchDir dir;
  testing::write_trace(dir.file("t"), steps(2), 10);
  auto bytes = testing::file_bytes(dir.file("t"));
  bytes[8] = static_cast<std::uint8_t>(kFormatVersion + 1);
  testing::write_bytes(dir.file("t"), bytes);
  Outcome o = read_until_error(dir.file("t"));
  ASSERT_TRUE(o.failed);
  EXPECT_NE(o.message.find("newer"), std::string::npos);
}

TEST(TraceReaderErrors, older_format_version_is_refused_with_advice) {
  ScratchDir dir;
  testing::write_trace(dir.file("t"), steps(2), 10);
  auto bytes = testing::file_bytes(dir.file("t"));
  bytes[8] = 0;
  testing::write_bytes(dir.file("t"), bytes);
  Outcome o = read_until_error(dir.file("t"));
  ASSERT_TRUE(o.failed);
  EXPECT_NE(o.message.find("older"), std::string::npos);
}

TEST(TraceReaderErrors, truncated_last_block_keeps_the_prefix_and_names_the_offset) {
  ScratchDir dir;
  testing::write_trace(dir.file("t"), steps(30), 10);  // three blocks
  auto bytes = testing::file_bytes(dir.file("t"));
  std::size_t full = bytes.size();
  bytes.resize(full - 5);
  testing::write_bytes(dir.file("t"), bytes);
  Outcome o = read_until_error(dir.file("t"));
  ASSERT_TRUE(o.failed);
  EXPECT_EQ(o.records.size(), 20u);
  EXPECT_NE(o.message.find("truncated block at byte " + std::to_string(o.offset)),
            std::string::npos);
  EXPECT_GT(o.offset, 32u);
  EXPECT_LT(o.offset, full);
}

TEST(TraceReaderErrors, truncated_block_header_is_reported) {
  ScratchDir dir;
  testing::write_trace(dir.file("t"), steps(10), 10);
  auto bytes = testing::file_bytes(dir.file("t"));
  std::size_t end_of_first = bytes.size();
  bytes.insert(bytes.end(), {0x47, 0x4c, 0x42});  // 3 bytes of a next header
  testing::write_bytes(dir.file("t"), bytes);
  Outcome o = read_until_error(dir.file("t"));
  ASSERT_TRUE(o.failed);
  EXPECT_EQ(o.records.size(), 10u);
  EXPECT_EQ(o.offset, end_of_first);
  EXPECT_NE(o.message.find("truncated block header"), std::string::npos);
}

TEST(TraceReaderErrors, flipped_payload_byte_is_detected_by_checksum) {
  ScratchDir dir;
  testing::write_trace(dir.file("t"), steps(20), 10);
  auto bytes = testing::file_bytes(dir.file("t"));
  bytes[bytes.size() - 10] ^= 0x5a;  // inside the second block's zstd frame
  testing::write_bytes(dir.file("t"), bytes);
  Outcome o = read_until_error(dir.file("t"));
  ASSERT_TRUE(o.failed);
  EXPECT_EQ(o.records.size(), 10u);
  EXPECT_NE(o.message.find("corrupt block at byte"), std::string::npos);
}

TEST(TraceReaderErrors, garbage_block_header_is_reported) {
  ScratchDir dir;
  testing::write_trace(dir.file("t"), steps(10), 10);
  auto bytes = testing::file_bytes(dir.file("t"));
  bytes[32] ^= 0xff;  // first block's magic
  testing::write_bytes(dir.file("t"), bytes);
  Outcome o = read_until_error(dir.file("t"));
  ASSERT_TRUE(o.failed);
  EXPECT_EQ(o.records.size(), 0u);
  EXPECT_EQ(o.offset, 32u);
  EXPECT_NE(o.message.find("wrong magic"), std::string::npos);
}

TEST(TraceReaderErrors, follow_mode_waits_for_a_block_being_written) {
  ScratchDir dir;
  testing::write_trace(dir.file("full"), steps(20), 10);
  auto bytes = testing::file_bytes(dir.file("full"));
  auto first_block_end = bytes.size();
  {
    // Find the end of the first block by writing a one-block trace.
    testing::write_trace(dir.file("one"), steps(10), 10);
    first_block_end = testing::file_bytes(dir.file("one")).size();
  }
  std::vector<std::uint8_t> partial(
      bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(first_block_end + 7));
  testing::write_bytes(dir.file("live"), partial);

  TraceReader reader(dir.file("live"));
  reader.set_follow(true);
  Record r;
  int seen = 0;
  TraceReader::Status status;
  while ((status = reader.next(r)) == TraceReader::Status::kRecord) ++seen;
  EXPECT_EQ(status, TraceReader::Status::kPending);
  EXPECT_EQ(seen, 10);

  testing::write_bytes(dir.file("live"), bytes);  // the writer finishes the block
  while ((status = reader.next(r)) == TraceReader::Status::kRecord) ++seen;
  EXPECT_EQ(status, TraceReader::Status::kPending);
  EXPECT_EQ(seen, 20);
}

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

// gpuleak run opens a new trace again every poll until its header is there:
// a refused file must not keep its descriptor.
TEST(TraceReaderErrors, refused_files_leave_no_descriptor_open) {
  ScratchDir dir;
  testing::write_bytes(dir.file("text"), std::vector<std::uint8_t>(100, 'a'));
  testing::write_bytes(dir.file("empty"), {});
  testing::write_trace(dir.file("newer"), steps(2), 10);
  auto bytes = testing::file_bytes(dir.file("newer"));
  bytes[8] = static_cast<std::uint8_t>(kFormatVersion + 1);
  testing::write_bytes(dir.file("newer"), bytes);
  std::size_t before = open_descriptors();
  for (int i = 0; i < 10; ++i) {
    for (const char* name : {"text", "empty", "newer"}) {
      EXPECT_TRUE(read_until_error(dir.file(name)).failed);
    }
    EXPECT_TRUE(read_until_error(dir.path()).failed);
  }
  EXPECT_EQ(open_descriptors(), before);
}

TEST(TraceReaderErrors, directory_is_refused) {
  ScratchDir dir;
  Outcome o = read_until_error(dir.path());
  ASSERT_TRUE(o.failed);
  EXPECT_NE(o.message.find("directory"), std::string::npos);
}

// A FIFO named as a trace (a folder may hold one) is refused at once: no
// wait for a writer that never comes.
TEST(TraceReaderErrors, fifo_is_refused_without_blocking) {
  ScratchDir dir;
  std::string path = dir.file("pipe.trace");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Outcome out = read_until_error(path);
  EXPECT_TRUE(out.failed);
  EXPECT_NE(out.message.find("is not a regular file"), std::string::npos) << out.message;
}

TEST(TraceReaderErrors, device_is_refused_without_reading_it) {
  Outcome out = read_until_error("/dev/zero");
  EXPECT_TRUE(out.failed);
  EXPECT_NE(out.message.find("/dev/zero: is not a regular file"), std::string::npos) << out.message;
}

}  // namespace
}  // namespace gpuleak::trace
