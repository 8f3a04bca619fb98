#include <gtest/gtest.h>

#include "trace/codec.h"
#include "trace/trace_reader.h"
#include "trace/trace_test_files.h"
#include "trace/trace_writer.h"

namespace gpuleak::trace {
namespace {

using testing::TempDir;

TEST(TraceRoundTrip, every_record_kind_reads_back_identically) {
  TempDir dir;
  auto records = testing::one_of_each_record();
  testing::write_trace(dir.file("t.trace"), records, 3);
  auto back = testing::read_all(dir.file("t.trace"));
  ASSERT_EQ(back.size(), records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(back[i], records[i])
        << "record " << i << " (variant index " << records[i].index() << ")";
  }
}

TEST(TraceRoundTrip, every_variant_alternative_is_covered) {
  auto records = testing::one_of_each_record();
  std::vector<bool> seen(std::variant_size_v<Record>, false);
  for (const auto& r : records) seen[r.index()] = true;
  for (std::size_t i = 0; i < seen.size(); ++i)
    EXPECT_TRUE(seen[i]) << "no sample for alternative " << i;
}

TEST(TraceRoundTrip, fixed_size_event_encoders_match_general_encoder) {
  AllocRecord alloc{~0ull, ~0ull,     ~0ull, ~0ull, MemoryKind::kTorchBlock,
                    ~0u,   INT32_MIN, ~0ull, ~0u,   ~0u};
  std::uint8_t fixed[kMaxEventBytes];
  std::size_t n = encode_alloc(alloc, fixed);
  ASSERT_LE(n, kMaxEventBytes);
  std::string general;
  encode_record(alloc, general);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(fixed), n), general);

  FreeRecord free_record{~0ull, ~0ull, ~0ull, MemoryKind::kDevice, ~0u, INT32_MAX, ~0u};
  n = encode_free(free_record, fixed);
  general.clear();
  encode_record(free_record, general);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(fixed), n), general);
}

TEST(TraceRoundTrip, unknown_record_types_are_skipped_and_counted) {
  TempDir dir;
  std::string error;
  auto writer = TraceWriter::create(dir.file("t.trace"), &error);
  ASSERT_TRUE(writer) << error;
  std::string block;
  encode_record(StepRecord{0, 1, 5, StepSource::kExplicit}, block);
  block += std::string("\xC8\x03xyz", 5);  // type 200, 3-byte body
  encode_record(StepRecord{1, 2, 6, StepSource::kExplicit}, block);
  ASSERT_TRUE(writer->write_block(block, 3, &error));
  writer.reset();

  TraceReader reader(dir.file("t.trace"));
  Record r;
  std::vector<std::uint64_t> steps;
  while (reader.next(r) == TraceReader::Status::kRecord)
    steps.push_back(std::get<StepRecord>(r).step);
  EXPECT_EQ(steps, (std::vector<std::uint64_t>{5, 6}));
  EXPECT_EQ(reader.unknown_records(), 1u);
}

TEST(TraceRoundTrip, appended_blocks_follow_the_original_ones) {
  TempDir dir;
  testing::write_trace(dir.file("t.trace"), {StepRecord{0, 1, 1, StepSource::kExplicit}}, 10);
  std::string error;
  auto writer = TraceWriter::append_to(dir.file("t.trace"), &error);
  ASSERT_TRUE(writer) << error;
  std::string block;
  encode_record(SymbolRecord{0x10, "main", "main.cu", 3, "/bin/a"}, block);
  ASSERT_TRUE(writer->write_block(block, 1, &error));
  writer.reset();
  auto back = testing::read_all(dir.file("t.trace"));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(std::get<SymbolRecord>(back[1]).function, "main");
}

TEST(TraceRoundTrip, create_refuses_to_overwrite_an_existing_trace) {
  TempDir dir;
  testing::write_trace(dir.file("t.trace"), {}, 1);
  std::string error;
  EXPECT_FALSE(TraceWriter::create(dir.file("t.trace"), &error));
  EXPECT_NE(error.find("t.trace"), std::string::npos);
}

}  // namespace
}  // namespace gpuleak::trace
