// `gpuleak report` keeps bounded memory and time whatever a trace says: a
// small crafted trace (issue 17) whose events are days apart once made
// 10,000 time windows times every site's series (gigabytes, then
// std::bad_alloc). Run through the real binary as a child process; its peak
// resident memory comes from wait4 and its time from the clock.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/process_runner.h"
#include "support/scratch_dir.h"
#include "trace/codec.h"
#include "trace/records.h"
#include "trace/trace_writer.h"

namespace gpuleak::cli {
namespace {

using gpuleak::testing::run_process;
using gpuleak::testing::ScratchDir;
using nlohmann::json;

const std::string kGpuleak = GPULEAK_TEST_GPULEAK;

constexpr std::uint64_t kSecondNs = 1'000'000'000ull;

// `sites` stacks each holding one allocation, then `silences` host-RSS
// samples a million seconds apart: every silence is worth (at least) a
// thousand time windows of a program that marks no steps.
void write_silent_trace(const std::string& path, std::uint32_t sites, std::uint32_t silences) {
  std::string error;
  auto writer = trace::TraceWriter::create(path, &error);
  if (!writer) throw std::runtime_error(error);
  std::string block;
  std::uint32_t records = 0;
  auto flush = [&] {
    if (!writer->write_block(block, records, &error)) throw std::runtime_error(error);
    block.clear();
    records = 0;
  };
  std::uint64_t start_ns = 1000 * kSecondNs;
  trace::encode_record(trace::ProcessRecord{4242, 1, 1700000000000000000ull, start_ns,
                                            "/usr/bin/app", "app --serve", "node-1", "0.1.0"},
                       block);
  trace::encode_record(trace::ApiNameRecord{243, "cuMemAlloc_v2"}, block);
  records += 2;
  std::uint64_t seq = 0;
  for (std::uint32_t s = 1; s <= sites; ++s) {
    trace::encode_record(trace::StackRecord{s, {0x401000ull + s * 16, 0x402000ull}, {}}, block);
    trace::AllocRecord a;
    a.seq = seq++;
    a.time_ns = start_ns + s;
    a.address = 0x7f0000000000ull + std::uint64_t{s} * 4096;
    a.size = 4096;
    a.kind = trace::MemoryKind::kDevice;
    a.api = 243;
    a.device = 0;
    a.stack_id = s;
    trace::encode_record(a, block);
    records += 2;
    if (records >= 20000) flush();
  }
  for (std::uint32_t i = 1; i <= silences; ++i) {
    trace::encode_record(trace::SampleRecord{seq++, start_ns + i * 1'000'000ull * kSecondNs,
                                             trace::Metric::kHostRssBytes, -1, 1ull << 30},
                         block);
    ++records;
  }
  flush();
}

// Ten allocations, then sequence number 10 missing with no LostRecord
// declaring it (part of the file lost), then `pairs` allocation/free pairs
// of one reused block: the event sequencer waits for number 10 until its
// bound of held events is reached.
void write_undeclared_gap_trace(const std::string& path, std::uint64_t pairs) {
  std::string error;
  auto writer = trace::TraceWriter::create(path, &error);
  if (!writer) throw std::runtime_error(error);
  std::string block;
  std::uint32_t records = 0;
  auto add = [&](const trace::Record& r) {
    trace::encode_record(r, block);
    if (++records >= 65536) {
      if (!writer->write_block(block, records, &error)) throw std::runtime_error(error);
      block.clear();
      records = 0;
    }
  };
  std::uint64_t time_ns = 1000 * kSecondNs;
  add(trace::ProcessRecord{4242, 1, 1700000000000000000ull, time_ns, "/usr/bin/python3",
                           "python3 train.py", "node-1", "0.1.0"});
  add(trace::ApiNameRecord{243, "cuMemAlloc_v2"});
  add(trace::StackRecord{1, {0x401010ull, 0x402000ull}, {}});
  auto alloc = [&](std::uint64_t seq, std::uint64_t address) {
    trace::AllocRecord a;
    a.seq = seq;
    a.time_ns = time_ns;
    a.address = address;
    a.size = 4096;
    a.kind = trace::MemoryKind::kDevice;
    a.api = 243;
    a.device = 0;
    a.stack_id = 1;
    return a;
  };
  std::uint64_t seq = 0;
  for (int i = 0; i < 10; ++i) add(alloc(seq++, 0x7f0000000000ull + i * 4096));
  ++seq;  // never comes
  for (std::uint64_t i = 0; i < pairs; ++i) {
    time_ns += 1000;
    add(alloc(seq++, 0x7f1000000000ull));
    trace::FreeRecord f;
    f.seq = seq++;
    f.time_ns = time_ns;
    f.address = 0x7f1000000000ull;
    f.kind = trace::MemoryKind::kDevice;
    f.api = 244;
    f.device = 0;
    add(f);
  }
  add(trace::ExitRecord{seq++, time_ns});
  if (!writer->write_block(block, records, &error)) throw std::runtime_error(error);
}

// `allocations` allocations from one stack, all live at the end.
void write_many_live_trace(const std::string& path, std::uint32_t allocations) {
  std::string error;
  auto writer = trace::TraceWriter::create(path, &error);
  if (!writer) throw std::runtime_error(error);
  std::string block;
  std::uint32_t records = 0;
  auto add = [&](const trace::Record& r) {
    trace::encode_record(r, block);
    if (++records >= 65536) {
      if (!writer->write_block(block, records, &error)) throw std::runtime_error(error);
      block.clear();
      records = 0;
    }
  };
  std::uint64_t time_ns = 1000 * kSecondNs;
  add(trace::ProcessRecord{4242, 1, 1700000000000000000ull, time_ns, "/usr/bin/app", "app --fill",
                           "node-1", "0.1.0"});
  add(trace::ApiNameRecord{243, "cuMemAlloc_v2"});
  add(trace::StackRecord{1, {0x401010ull, 0x402000ull}, {}});
  for (std::uint32_t i = 0; i < allocations; ++i) {
    trace::AllocRecord a;
    a.seq = i;
    a.time_ns = time_ns + i;
    a.address = 0x7f0000000000ull + std::uint64_t{i} * 4096;
    a.size = 4096;
    a.kind = trace::MemoryKind::kDevice;
    a.api = 243;
    a.device = 0;
    a.stack_id = 1;
    add(a);
  }
  if (!writer->write_block(block, records, &error)) throw std::runtime_error(error);
}

TEST(ReportBounds, exports_of_a_trace_past_their_bounds_are_bounded_and_say_what_they_left_out) {
  ScratchDir dir;
  std::string trace = dir.file("gpuleak-4242.trace");
  write_many_live_trace(trace, 250000);
  auto viz = run_process(
      {kGpuleak, "report", trace, "--format", "memory_viz", "-o", dir.file("s.pickle")});
  ASSERT_EQ(viz.exit_code, 0) << viz.describe();
  EXPECT_LT(viz.max_rss_kib, 1L << 20) << "peak resident KiB";
  // The pickle's own note: 200,000 of the 250,000 live allocations, the last 100,000 events.
  auto read = run_process(
      {"/usr/bin/python3", "-c",
       "import pickle,sys; g=pickle.load(open(sys.argv[1],'rb'))['gpuleak']; "
       "print(g['live_allocations'], g['live_allocations_written'], g['events_written']); "
       "print(g['left_out'])",
       dir.file("s.pickle")});
  ASSERT_EQ(read.exit_code, 0) << read.describe();
  EXPECT_NE(read.out.find("250000 200000 100000"), std::string::npos) << read.out;
  EXPECT_NE(read.out.find("50000 of 250000 live allocations past the bound"), std::string::npos)
      << read.out;
  auto perfetto =
      run_process({kGpuleak, "report", trace, "--format", "perfetto", "-o", dir.file("t.json")});
  ASSERT_EQ(perfetto.exit_code, 0) << perfetto.describe();
  std::ifstream in(dir.file("t.json"));
  json doc = json::parse(in);
  std::size_t instants = 0;
  for (const json& e : doc.at("traceEvents")) instants += e.at("ph") == "i" ? 1 : 0;
  EXPECT_EQ(instants, 20000u);
  EXPECT_NE(doc.at("metadata").at("left_out").dump().find("the first 230000 of 250000"),
            std::string::npos)
      << doc.at("metadata").dump();
}

TEST(ReportBounds, an_undeclared_gap_before_millions_of_events_reports_within_a_gib) {
  // Events behind a gap nothing declared are held until the sequencer gives
  // up on it (2^22 of them): that bound must keep the report under 1 GiB.
  ScratchDir dir;
  std::string trace = dir.file("gpuleak-4242.trace");
  constexpr std::uint64_t kPairs = 2'250'000;  // 4.5M events behind the gap
  write_undeclared_gap_trace(trace, kPairs);
  auto result = run_process({kGpuleak, "report", "--json-report", dir.file("report.json"), trace});
  RecordProperty("max_rss_kib", std::to_string(result.max_rss_kib));
  // Part of the trace is missing: reported, with exit status 3.
  ASSERT_EQ(result.exit_code, 3) << result.describe();
  EXPECT_LT(result.max_rss_kib, 1L << 20) << "peak resident KiB";
  std::ifstream in(dir.file("report.json"));
  json report = json::parse(in);
  const json& events = report.at("processes").at(0).at("events");
  EXPECT_EQ(events.at("allocations").get<std::uint64_t>(), 10 + kPairs);
  EXPECT_EQ(events.at("frees").get<std::uint64_t>(), kPairs);
}

TEST(ReportBounds, a_trace_with_silences_of_days_reports_within_a_gib_and_thirty_seconds) {
  ScratchDir dir;
  std::string trace = dir.file("gpuleak-4242.trace");
  write_silent_trace(trace, 20000, 20);
  ASSERT_LT(std::filesystem::file_size(trace), 1u << 20) << "the crafted trace is small";
  auto begin = std::chrono::steady_clock::now();
  auto result = run_process({kGpuleak, "report", "--json-report", dir.file("report.json"), trace});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_EQ(result.exit_code, 0) << result.describe();
  EXPECT_LT(result.max_rss_kib, 1L << 20) << "peak resident KiB";
  EXPECT_LT(seconds, 30.0);
  std::ifstream in(dir.file("report.json"));
  json report = json::parse(in);
  const json& process = report.at("processes").at(0);
  // Every window is counted; the timeline carries a bounded choice of them.
  EXPECT_GE(process.at("timeline").at("boundaries").get<std::uint64_t>(), 20000u);
  EXPECT_LE(process.at("timeline").at("step").size(), 8192u);
  EXPECT_EQ(process.at("events").at("allocations").get<std::uint64_t>(), 20000u);
}

}  // namespace
}  // namespace gpuleak::cli
