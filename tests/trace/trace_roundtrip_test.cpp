#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace/codec.h"
#include "trace/trace_reader.h"
#include "trace/trace_test_files.h"
#include "trace/trace_writer.h"

namespace gpuleak::trace {
namespace {

using testing::ScratchDir;

TEST(TraceRoundTrip, every_record_kind_reads_back_identically) {
  ScratchDir dir;
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

// The edges of every field type: 0 and the largest u64/u32, both ends of
// i32, empty strings and strings with NUL bytes and UTF-8, empty and long
// frame lists, and every value of every enumeration.
TEST(TraceRoundTrip, extreme_field_values_and_every_enum_value_read_back_identically) {
  constexpr std::uint64_t kU64 = ~0ull;
  constexpr std::uint32_t kU32 = ~0u;
  const char odd_bytes[] = "nul\0inside \xc3\xa9\xe2\x82\xac\n\t";
  const std::string odd(odd_bytes, sizeof odd_bytes - 1);
  const std::string long_text(100000, 'x');
  std::vector<std::uint64_t> many_frames(256);
  for (std::size_t i = 0; i < many_frames.size(); ++i) many_frames[i] = kU64 - i;
  std::vector<PythonFrame> many_python(64, PythonFrame{kU32, kU32});

  std::vector<Record> r;
  r.push_back(ProcessRecord{kU32, 0, kU64, 0, "", odd, long_text, ""});
  r.push_back(ProcessRecord{0, kU32, 0, kU64, odd, "", "", long_text});
  r.push_back(ApiNameRecord{kU32, ""});
  r.push_back(ApiNameRecord{0, odd});
  r.push_back(ThreadRecord{kU32, odd});
  r.push_back(ModuleRecord{kU64, 0, kU64, long_text});
  r.push_back(PythonCodeRecord{kU32, odd, "", kU32});
  r.push_back(StackRecord{kU32, many_frames, many_python});
  r.push_back(StackRecord{0, {}, {}});
  r.push_back(StackRecord{1, {0}, {}});
  r.push_back(StackRecord{2, {}, {{0, 0}}});
  r.push_back(SymbolRecord{kU64, odd, long_text, kU32, "", {}});
  r.push_back(SymbolRecord{1,
                           "inlined",
                           "a.h",
                           3,
                           "/lib/x.so",
                           {{"outer", "b.cpp", kU32}, {odd, "", 0}, {"", long_text, 1}}});
  for (int k = 1; k <= 9; ++k) {
    auto kind = static_cast<MemoryKind>(k);
    r.push_back(AllocRecord{kU64, 0, kU64, 0, kind, kU32, INT32_MIN, kU64, 0, kU32});
    r.push_back(AllocRecord{0, kU64, 0, kU64, kind, 0, INT32_MAX, 0, kU32, 0});
    r.push_back(FreeRecord{kU64, kU64, kU64, kind, kU32, INT32_MIN, kU32});
    r.push_back(AllocFailedRecord{kU64, kU64, kU64, kind, kU32, INT32_MAX, kU32, kU32, kU32});
  }
  for (int s = 1; s <= 3; ++s)
    r.push_back(StepRecord{kU64, kU64, kU64, static_cast<StepSource>(s)});
  for (int m = 1; m <= 7; ++m)
    r.push_back(SampleRecord{kU64, 0, static_cast<Metric>(m), INT32_MIN, kU64});
  r.push_back(AnnotationRecord{kU64, kU64, "", ""});
  r.push_back(AnnotationRecord{0, 0, odd, long_text});
  for (int a = 1; a <= 4; ++a)
    r.push_back(ContextRecord{kU64, kU64, static_cast<ContextAction>(a), kU64, INT32_MIN});
  r.push_back(ExitRecord{kU64, kU64});
  r.push_back(ExitRecord{0, 0});
  r.push_back(LostRecord{kU64, kU64, kU64, {{kU64 - 1, 1}, {0, kU64}}});
  r.push_back(LostRecord{0, 0, 0, {}});

  ScratchDir dir;
  testing::write_trace(dir.file("t.trace"), r, 7);
  auto back = testing::read_all(dir.file("t.trace"));
  ASSERT_EQ(back.size(), r.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(back[i], r[i]) << "record " << i << " (variant index " << r[i].index() << ")";
  }
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
  ScratchDir dir;
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
  ScratchDir dir;
  testing::write_trace(dir.file("t.trace"), {StepRecord{0, 1, 1, StepSource::kExplicit}}, 10);
  std::string error;
  auto writer = TraceWriter::append_to(dir.file("t.trace"), &error);
  ASSERT_TRUE(writer) << error;
  std::string block;
  encode_record(SymbolRecord{0x10, "main", "main.cu", 3, "/bin/a", {}}, block);
  ASSERT_TRUE(writer->write_block(block, 1, &error));
  writer.reset();
  auto back = testing::read_all(dir.file("t.trace"));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(std::get<SymbolRecord>(back[1]).function, "main");
}

// Format 1.1 appended the inline chain to SymbolRecord: a body written
// before it (ending after `module`) still decodes, with no inline callers.
TEST(TraceRoundTrip, symbol_record_without_the_inline_tail_still_decodes) {
  std::string full;
  encode_record(SymbolRecord{0x10, "main", "main.cu", 3, "/bin/a", {}}, full);
  // type byte, body length, body; the tail of an empty list is its count, one 0 byte.
  ASSERT_EQ(static_cast<std::uint8_t>(full.back()), 0u);
  std::string old_style = full.substr(0, full.size() - 1);
  old_style[1] = static_cast<char>(static_cast<std::uint8_t>(old_style[1]) - 1);
  const auto* begin = reinterpret_cast<const std::uint8_t*>(old_style.data());
  const std::uint8_t* cursor = begin;
  Record back;
  ASSERT_EQ(decode_record(&cursor, begin + old_style.size(), back), DecodeStatus::kRecord);
  EXPECT_EQ(cursor, begin + old_style.size());
  const auto& symbol = std::get<SymbolRecord>(back);
  EXPECT_EQ(symbol.function, "main");
  EXPECT_EQ(symbol.module, "/bin/a");
  EXPECT_TRUE(symbol.inlined_into.empty());
}

// Format 1.2 appended the sequence-number ranges to LostRecord: a body
// written by an older collector (ending after `events`) decodes with no
// ranges, so its lost events are counted, not refused.
TEST(TraceRoundTrip, lost_record_without_the_ranges_tail_still_decodes) {
  std::string full;
  encode_record(LostRecord{25, 1000, 5, {}}, full);
  ASSERT_EQ(static_cast<std::uint8_t>(full.back()), 0u);  // the empty list's count
  std::string old_style = full.substr(0, full.size() - 1);
  old_style[1] = static_cast<char>(static_cast<std::uint8_t>(old_style[1]) - 1);
  const auto* begin = reinterpret_cast<const std::uint8_t*>(old_style.data());
  const std::uint8_t* cursor = begin;
  Record back;
  ASSERT_EQ(decode_record(&cursor, begin + old_style.size(), back), DecodeStatus::kRecord);
  EXPECT_EQ(cursor, begin + old_style.size());
  const auto& lost = std::get<LostRecord>(back);
  EXPECT_EQ(lost.seq, 25u);
  EXPECT_EQ(lost.events, 5u);
  EXPECT_TRUE(lost.ranges.empty());
}

TEST(TraceRoundTrip, lost_record_with_a_range_count_larger_than_its_body_is_malformed) {
  std::string body;
  body.push_back(1);                       // seq
  body.push_back(2);                       // time_ns
  body.push_back(3);                       // events
  body.push_back(static_cast<char>(100));  // 100 ranges, no bytes for them
  std::string record =
      std::string(1, static_cast<char>(RecordType::kLost)) + static_cast<char>(body.size()) + body;
  const auto* begin = reinterpret_cast<const std::uint8_t*>(record.data());
  const std::uint8_t* cursor = begin;
  Record back;
  EXPECT_EQ(decode_record(&cursor, begin + record.size(), back), DecodeStatus::kMalformed);
}

TEST(TraceRoundTrip, new_traces_are_private_to_their_user) {
  ScratchDir dir;
  ::umask(0);  // whatever the umask, the trace is 0600
  testing::write_trace(dir.file("t.trace"), testing::one_of_each_record(), 4);
  ::umask(022);
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("t.trace").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A block past the file size limit (ulimit -f) is refused before write(),
// so the process gets no SIGXFSZ (which would end it), and the file is left
// ending inside a block header, so readers see where it stops.
TEST(TraceRoundTrip, block_past_the_file_size_limit_is_refused_and_the_trace_marked_cut) {
  ScratchDir dir;
  std::string path = dir.file("t.trace");
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string error;
    auto writer = TraceWriter::create(path, &error);
    if (!writer) ::_exit(10);
    std::string first;
    encode_record(ProcessRecord{1, 0, 0, 0, "a", "a", "h", "v"}, first);
    if (!writer->write_block(first, 1, &error)) ::_exit(11);
    rlimit limit{writer->bytes_written() + 20, RLIM_INFINITY};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(12);
    std::string big;
    for (int i = 0; i < 1000; ++i)
      encode_record(StepRecord{static_cast<std::uint64_t>(i), 1, 1, StepSource::kExplicit}, big);
    bool written = writer->write_block(big, 1000, &error);
    ::_exit(!written && error.find("file size limit") != std::string::npos ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  try {
    TraceReader reader(path);
    Record r;
    ASSERT_EQ(reader.next(r), TraceReader::Status::kRecord);
    reader.next(r);
    FAIL() << "the cut trace read to its end";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("the collector could not write more"), std::string::npos)
        << e.what();
  }
}

TEST(TraceRoundTrip, create_refuses_to_overwrite_an_existing_trace) {
  ScratchDir dir;
  testing::write_trace(dir.file("t.trace"), {}, 1);
  std::string error;
  EXPECT_FALSE(TraceWriter::create(dir.file("t.trace"), &error));
  EXPECT_NE(error.find("t.trace"), std::string::npos);
}

}  // namespace
}  // namespace gpuleak::trace
