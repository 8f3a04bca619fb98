// The compaction summary (trace_summary.h) and the bounded writer
// (bounded_trace_writer.h): what a compacted trace keeps, that it reads back
// through the sequencer as the state at the compaction point, and that the
// file stays under its bound.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <set>

#include "trace/bounded_trace_writer.h"
#include "trace/codec.h"
#include "trace/event_sequencer.h"
#include "trace/file_layout.h"
#include "trace/trace_feed.h"
#include "trace/trace_summary.h"
#include "trace/trace_test_files.h"

namespace gpuleak::trace {
namespace {

using testing::ScratchDir;

Record alloc(std::uint64_t seq, std::uint64_t address, std::uint32_t stack,
             std::uint64_t size = 4096) {
  return AllocRecord{seq, 1000 + seq, address, size, MemoryKind::kTorchBlock, 1, 0, 0, 7, stack};
}
Record free_of(std::uint64_t seq, std::uint64_t address) {
  return FreeRecord{seq, 1000 + seq, address, MemoryKind::kTorchBlock, 2, 0, 7};
}
Record step(std::uint64_t seq, std::uint64_t n) {
  return StepRecord{seq, 1000 + seq, n, StepSource::kExplicit, 0};
}

// Everything the feed hands out for a trace, in order.
std::vector<Record> feed_all(const std::string& path, SequenceFindings* findings = nullptr) {
  TraceFeed feed(path);
  std::vector<Record> out;
  auto take = [&](const Record& r) { out.push_back(r); };
  feed.read(take);
  feed.finish(take);
  EXPECT_FALSE(feed.error()) << feed.error()->what();
  EXPECT_TRUE(feed.damage().empty()) << feed.damage().front();
  if (findings) *findings = feed.findings();
  return out;
}

std::vector<Record> summary_of(TraceSummary& summary, std::uint64_t bound = 0) {
  std::string all;
  EXPECT_TRUE(summary.encode(
      [&](std::string_view block, std::uint32_t) {
        all.append(block);
        return true;
      },
      bound));
  std::vector<Record> out;
  const auto* cursor = reinterpret_cast<const std::uint8_t*>(all.data());
  const auto* end = cursor + all.size();
  Record r;
  while (cursor < end) {
    EXPECT_EQ(decode_record(&cursor, end, r), DecodeStatus::kRecord);
    out.push_back(r);
  }
  return out;
}

TEST(TraceSummary, keeps_live_allocations_definitions_and_annotations_and_drops_the_rest) {
  TraceSummary summary;
  summary.observe(ProcessRecord{42, 1, 5, 6, "/bin/x", "x", "h", "v"});
  summary.observe(StackRecord{1, {0x10}, {}});
  summary.observe(alloc(0, 0xa0, 1));
  summary.observe(alloc(1, 0xb0, 1));
  summary.observe(free_of(2, 0xa0));
  summary.observe(AnnotationRecord{3, 1003, "torch_tracking", "{}"});
  summary.observe(step(4, 1));
  summary.observe(SampleRecord{5, 1005, Metric::kHostRssBytes, -1, 10});
  summary.observe(SampleRecord{6, 1006, Metric::kHostRssBytes, -1, 20});
  auto records = summary_of(summary, 64ull << 20);

  ASSERT_GE(records.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<ProcessRecord>(records[0]));
  EXPECT_TRUE(std::holds_alternative<StackRecord>(records[1]));
  const auto& compaction = std::get<CompactionRecord>(records[2]);
  EXPECT_EQ(compaction.through_seq, 7u);
  EXPECT_EQ(compaction.compactions, 1u);
  EXPECT_EQ(compaction.allocations, 2u);
  EXPECT_EQ(compaction.frees, 1u);
  EXPECT_EQ(compaction.steps, 1u);
  EXPECT_EQ(compaction.bound_bytes, 64ull << 20);
  EXPECT_EQ(compaction.peak_live_bytes, 8192u);
  EXPECT_EQ(compaction.lost_events, 0u);
  // The freed pair, the older sample and the step mark (kept as a summary
  // point) went: 2 + 1 + 1 events.
  EXPECT_EQ(compaction.dropped_events, 4u);
  std::vector<std::uint64_t> kept;
  for (const Record& r : records) {
    if (const auto* s = std::get_if<StepSummaryRecord>(&r)) {
      EXPECT_EQ(s->step, 1u);
      EXPECT_EQ(s->live_bytes, 4096u);
    }
    std::uint64_t seq = 0;
    if (record_seq(r, &seq)) kept.push_back(seq);
  }
  EXPECT_EQ(kept, (std::vector<std::uint64_t>{1, 3, 6}));  // live block, annotation, last sample
}

TEST(TraceSummary, events_out_of_order_are_matched_by_sequence_not_by_file_order) {
  TraceSummary summary;
  // The freeing thread's buffer reached the file first: the free of 0xa0
  // (seq 1) comes before its allocation (seq 0), and the block's reuse
  // (seq 2) before both.
  summary.observe(alloc(2, 0xa0, 1));
  summary.observe(free_of(1, 0xa0));
  summary.observe(alloc(0, 0xa0, 1));
  auto records = summary_of(summary);
  std::vector<std::uint64_t> kept;
  for (const Record& r : records) {
    std::uint64_t seq = 0;
    if (record_seq(r, &seq)) kept.push_back(seq);
  }
  EXPECT_EQ(kept, (std::vector<std::uint64_t>{2}));
}

TEST(TraceSummary, events_still_held_back_are_written_raw_after_the_summary) {
  TraceSummary summary;
  summary.observe(alloc(0, 0xa0, 1));
  summary.observe(alloc(2, 0xb0, 1));  // 1 is on its way (another thread's buffer)
  auto records = summary_of(summary);
  const CompactionRecord* compaction = nullptr;
  for (const Record& r : records)
    if (const auto* c = std::get_if<CompactionRecord>(&r)) compaction = c;
  ASSERT_NE(compaction, nullptr);
  EXPECT_EQ(compaction->through_seq, 1u);
  std::uint64_t last = 0;
  ASSERT_TRUE(record_seq(records.back(), &last));
  EXPECT_EQ(last, 2u);
}

TEST(TraceSummary, step_marks_thin_out_to_a_coarser_resolution_past_the_limit) {
  TraceSummary summary;
  std::uint64_t steps = TraceSummary::kMaxStepPoints * 3;
  for (std::uint64_t i = 0; i < steps; ++i) summary.observe(step(i, i + 1));
  EXPECT_EQ(summary.step_resolution(), 4u);
  auto records = summary_of(summary);
  std::size_t points = 0;
  for (const Record& r : records) points += std::holds_alternative<StepSummaryRecord>(r);
  EXPECT_LE(points, TraceSummary::kMaxStepPoints);
  EXPECT_GE(points, TraceSummary::kMaxStepPoints / 2);
}

TEST(TraceSummary, lost_events_before_the_compaction_are_counted_in_it) {
  TraceSummary summary;
  summary.observe(alloc(0, 0xa0, 1));
  summary.observe(LostRecord{3, 1003, 2, {{1, 2}}});
  auto records = summary_of(summary);
  for (const Record& r : records)
    if (const auto* c = std::get_if<CompactionRecord>(&r)) {
      EXPECT_EQ(c->lost_events, 2u);
    }
}

TEST(EventSequencer, events_a_summary_kept_pass_through_and_nothing_counts_as_lost) {
  EventSequencer s;
  s.push(CompactionRecord{100, 0, 0, 1});
  s.push(alloc(7, 0xa0, 1));  // kept by the summary
  s.push(alloc(42, 0xb0, 1));
  s.push(alloc(101, 0xc0, 1));  // raw, held until 100 comes
  s.push(alloc(100, 0xd0, 1));
  std::vector<std::uint64_t> order;
  Record r;
  while (s.pop(r)) {
    std::uint64_t seq = 0;
    if (record_seq(r, &seq)) order.push_back(seq);
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{7, 42, 100, 101}));
  s.finish();
  EXPECT_FALSE(s.pop(r));
  EXPECT_EQ(s.findings().undeclared_skipped, 0u);
  EXPECT_EQ(s.findings().declared_skipped, 0u);
  EXPECT_EQ(s.findings().repeated_events, 0u);
  EXPECT_EQ(s.findings().late_events, 0u);
}

// A stream of steps with a working set, churn and one site that keeps a
// block every step, through the bounded writer as the collector writes it.
struct Stream {
  std::uint64_t seq = 0;
  std::uint64_t next_address = 0x10000;
  std::vector<std::uint64_t> kept;  // the leaking site's blocks
  std::string block;
  std::uint32_t count = 0;
  void add(const Record& r) {
    encode_record(r, block);
    ++count;
  }
  void write_steps(BoundedTraceWriter& writer, std::uint64_t steps, std::uint64_t first_step) {
    for (std::uint64_t n = first_step; n < first_step + steps; ++n) {
      std::vector<std::uint64_t> churn;
      for (int i = 0; i < 200; ++i) {
        churn.push_back(0x90000000 + static_cast<std::uint64_t>(i) * 0x1000);
        add(alloc(seq++, churn.back(), 2, 65536));
      }
      for (std::uint64_t address : churn) add(free_of(seq++, address));
      kept.push_back(next_address);
      add(alloc(seq++, next_address, 3));
      next_address += 0x1000;
      add(step(seq++, n));
      if (n % 8 == 0) {
        std::string error;
        ASSERT_TRUE(writer.write_block(block, count, &error)) << error;
        block.clear();
        count = 0;
      }
    }
  }
};

std::uint64_t size_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

TEST(BoundedTraceWriter, a_compacted_trace_reads_back_as_the_live_state_and_the_raw_tail) {
  ScratchDir dir;
  std::string path = dir.file("t.trace");
  std::string error;
  auto writer = BoundedTraceWriter::create(path, BoundedTraceWriter::kMinBoundBytes, &error);
  ASSERT_TRUE(writer) << error;
  Stream stream;
  stream.add(ProcessRecord{42, 1, 5, 6, "/bin/x", "x", "h", "v"});
  for (std::uint32_t stack = 1; stack <= 3; ++stack) stream.add(StackRecord{stack, {stack}, {}});
  stream.add(AnnotationRecord{stream.seq++, 999, "torch_tracking", "{}"});
  std::uint64_t largest = 0;
  for (int round = 0; round < 40 && writer->stats().compactions < 2; ++round) {
    stream.write_steps(*writer, 800, 1 + static_cast<std::uint64_t>(round) * 800);
    largest = std::max(largest, size_of(path));
  }
  ASSERT_TRUE(writer->write_block(stream.block, stream.count, &error)) << error;
  ASSERT_GE(writer->stats().compactions, 2u);
  EXPECT_LE(largest, BoundedTraceWriter::kMinBoundBytes / 2 + (1u << 20));

  // Format 2 in the header, so older readers refuse it.
  auto bytes = testing::file_bytes(path);
  std::uint32_t version = 0;
  std::string problem;
  ASSERT_TRUE(check_file_header(bytes.data(), &problem, &version)) << problem;
  EXPECT_EQ(version, kFormatVersion);

  SequenceFindings findings;
  auto records = feed_all(path, &findings);
  EXPECT_EQ(findings.undeclared_skipped, 0u);
  EXPECT_EQ(findings.repeated_events, 0u);
  // Replaying the feed gives exactly the leaking site's blocks as live, and
  // one annotation.
  std::set<std::uint64_t> live;
  int annotations = 0, compactions = 0;
  for (const Record& r : records) {
    if (const auto* a = std::get_if<AllocRecord>(&r)) live.insert(a->address);
    if (const auto* f = std::get_if<FreeRecord>(&r)) live.erase(f->address);
    annotations += std::holds_alternative<AnnotationRecord>(r);
    compactions += std::holds_alternative<CompactionRecord>(r);
  }
  EXPECT_EQ(annotations, 1);
  EXPECT_EQ(compactions, 1);
  EXPECT_EQ(live, std::set<std::uint64_t>(stream.kept.begin(), stream.kept.end()));
}

TEST(BoundedTraceWriter, a_summary_too_large_for_the_bound_stops_it_and_leaves_the_trace_whole) {
  ScratchDir dir;
  std::string path = dir.file("t.trace");
  std::string error;
  auto writer = BoundedTraceWriter::create(path, BoundedTraceWriter::kMinBoundBytes, &error);
  ASSERT_TRUE(writer) << error;
  // Every block allocation stays live, with a stack of its own: the summary
  // is as large as the trace.
  std::uint64_t seq = 0;
  bool failed = false;
  for (int round = 0; round < 400 && !failed; ++round) {
    std::string block;
    std::uint32_t count = 0;
    if (round == 0) {
      encode_record(ProcessRecord{42, 1, 5, 6, "/bin/x", "x", "h", "v"}, block);
      ++count;
    }
    for (int i = 0; i < 2000; ++i) {
      std::uint32_t stack = static_cast<std::uint32_t>(seq + 1);
      std::vector<std::uint64_t> frames;
      for (int f = 0; f < 16; ++f) frames.push_back(seq * 7919 + static_cast<std::uint64_t>(f));
      encode_record(StackRecord{stack, frames, {}}, block);
      encode_record(alloc(seq, 0x100000 + seq * 64, stack), block);
      ++seq;
      count += 2;
    }
    failed = !writer->write_block(block, count, &error);
  }
  ASSERT_TRUE(failed);
  EXPECT_TRUE(writer->stopped_by_bound());
  EXPECT_NE(error.find("GPULEAK_TRACE_MAX_BYTES"), std::string::npos) << error;
  EXPECT_LE(size_of(path), BoundedTraceWriter::kMinBoundBytes);
  EXPECT_EQ(size_of(path + ".compacting"), 0u);
  // The trace is whole: it reads to its end.
  EXPECT_FALSE(feed_all(path).empty());
}

TEST(BoundedTraceWriter, a_bound_below_the_least_is_refused) {
  ScratchDir dir;
  std::string error;
  EXPECT_FALSE(BoundedTraceWriter::create(dir.file("t.trace"), 1 << 20, &error));
  EXPECT_NE(error.find("below the least"), std::string::npos);
}

}  // namespace
}  // namespace gpuleak::trace
