// What is live at the end, out-of-memory snapshots, grouping and
// suppressions, on synthetic traces and on trace files.
#include <gtest/gtest.h>

#include "analysis/synthetic_trace.h"
#include "analysis/trace_loader.h"
#include "trace/codec.h"
#include "trace/trace_test_files.h"
#include "trace/trace_writer.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;
using trace::MemoryKind;

TEST(ProcessReport, live_allocations_at_exit_are_grouped_by_site_largest_first) {
  SyntheticTrace t;
  auto small = t.python_site("/work/a.py", 3, "small");
  auto big = t.python_site("/work/b.py", 9, "big");
  for (int i = 0; i < 3; ++i) t.alloc(small, 1024, MemoryKind::kDevice);
  auto freed = t.alloc(big, 1 << 20, MemoryKind::kDevice);
  t.alloc(big, 1 << 20, MemoryKind::kDevice);
  t.free(freed, MemoryKind::kDevice);
  ProcessReport r = t.analyze().build_report("x");
  ASSERT_EQ(r.leaks.groups.size(), 2u);
  EXPECT_EQ(r.leaks.bytes, 3u * 1024 + (1 << 20));
  EXPECT_EQ(r.leaks.allocations, 4u);
  EXPECT_EQ(r.leaks.groups[0].site.label(), "b.py:9");
  EXPECT_EQ(r.leaks.groups[0].allocations, 1u);
  EXPECT_EQ(r.leaks.groups[1].allocations, 3u);
  EXPECT_EQ(r.allocations, 5u);
  EXPECT_EQ(r.frees, 1u);
}

TEST(ProcessReport, stacks_with_the_same_visible_frames_merge) {
  SyntheticTrace t;
  // Two stack ids, same user frame (e.g. different paths inside CUDA).
  auto a = t.python_site("/work/a.py", 3, "f");
  auto b = t.python_site("/work/a.py", 3, "f");
  t.alloc(a, 10, MemoryKind::kDevice);
  t.alloc(b, 20, MemoryKind::kDevice);
  ProcessReport r = t.analyze().build_report("x");
  ASSERT_EQ(r.leaks.groups.size(), 1u);
  EXPECT_EQ(r.leaks.groups[0].bytes, 30u);
  EXPECT_EQ(r.leaks.groups[0].stack_ids.size(), 2u);
}

TEST(ProcessReport, address_spaces_do_not_collide) {
  SyntheticTrace t;
  auto site = t.python_site("/work/a.py", 3, "f");
  // A VMM handle numerically equal to a device pointer stays separate.
  std::uint64_t pointer = t.alloc(site, 100, MemoryKind::kDevice);
  trace::AllocRecord handle;
  (void)handle;
  t.free(pointer, MemoryKind::kVmmPhysical);  // not the same allocation: no effect
  ProcessReport r = t.analyze().build_report("x");
  EXPECT_EQ(r.leaks.allocations, 1u);
  EXPECT_EQ(r.unmatched_frees, 1u);
}

TEST(ProcessReport, out_of_memory_keeps_what_was_live_then) {
  SyntheticTrace t;
  auto kept = t.python_site("/work/a.py", 8, "keep");
  auto huge = t.python_site("/work/a.py", 14, "ask");
  auto a = t.alloc(kept, 64 << 20, MemoryKind::kDevice);
  t.alloc_failed(huge, 1ull << 40);
  t.free(a, MemoryKind::kDevice);
  ProcessReport r = t.analyze().build_report("x");
  ASSERT_EQ(r.out_of_memory.size(), 1u);
  const auto& oom = r.out_of_memory[0];
  EXPECT_EQ(oom.requested_bytes, 1ull << 40);
  EXPECT_EQ(oom.live_bytes, 64u << 20);
  EXPECT_EQ(oom.live_allocations, 1u);
  EXPECT_EQ(oom.site.label(), "a.py:14");
  ASSERT_EQ(oom.largest_live.size(), 1u);
  EXPECT_EQ(oom.largest_live[0].site.label(), "a.py:8");
  EXPECT_EQ(r.leaks.allocations, 0u);
}

TEST(ProcessReport, suppressions_move_matching_groups_aside) {
  SyntheticTrace t;
  auto pool = t.python_site("/work/pool.py", 5, "make_pool");
  auto leak = t.python_site("/work/a.py", 3, "f");
  t.alloc(pool, 1 << 20, MemoryKind::kDevice);
  t.alloc(leak, 10, MemoryKind::kDevice);
  AnalysisOptions options;
  std::string error;
  ASSERT_TRUE(options.suppressions.parse("# long-lived by design\nleak:make_pool\n", &error))
      << error;
  ProcessReport r = t.analyze(options).build_report("x");
  EXPECT_EQ(r.leaks.allocations, 1u);
  EXPECT_EQ(r.leaks.suppressed_allocations, 1u);
  ASSERT_EQ(r.leaks.suppressed_groups.size(), 1u);
  EXPECT_EQ(r.leaks.suppressed_groups[0].suppressed_by, "leak:make_pool");
}

TEST(ProcessReport, suppressions_match_file_line_module_and_kind) {
  LeakGroup g;
  g.kind = MemoryKind::kHostPinned;
  Frame f;
  f.function = "ns::alloc_staging(int)";
  f.file = "/src/io/staging.cu";
  f.line = 17;
  f.module = "/opt/app/libio.so";
  g.frames.push_back(f);
  for (const char* rule : {"leak:staging.cu:17", "leak:*alloc_staging*", "leak:libio.so",
                           "leak:/src/io/*", "kind:host-pinned"}) {
    Suppressions s;
    std::string error;
    ASSERT_TRUE(s.parse(rule, &error)) << error;
    EXPECT_TRUE(s.match(g).has_value()) << rule;
  }
  Suppressions none;
  std::string error;
  ASSERT_TRUE(none.parse("leak:other.cu:*\nkind:device", &error));
  EXPECT_FALSE(none.match(g).has_value());
}

TEST(ProcessReport, bad_suppression_line_is_reported_with_its_number) {
  Suppressions s;
  std::string error;
  EXPECT_FALSE(s.parse("leak:ok\n\nfoo bar\n", &error));
  EXPECT_NE(error.find("line 3"), std::string::npos);
}

// Two threads' buffers flushed out of order: the free of an address is in
// an earlier block than its allocation. The reader must restore the order.
TEST(ProcessReport, events_flushed_out_of_order_are_accounted_exactly) {
  trace::testing::ScratchDir dir;
  std::string path = dir.file("t.trace");
  std::string error;
  auto writer = trace::TraceWriter::create(path, &error);
  ASSERT_TRUE(writer) << error;
  std::string first, second;
  trace::encode_record(trace::ProcessRecord{1, 0, 0, 0, "", "", "", ""}, first);
  // Thread B (flushed first): frees of addresses allocated by thread A.
  std::uint32_t b_count = 0, a_count = 1;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    trace::encode_record(trace::FreeRecord{2 * i + 1, 0, 0x1000 + i, MemoryKind::kDevice, 0, 0, 2},
                         second);
    ++b_count;
  }
  for (std::uint64_t i = 0; i < 1000; ++i) {
    trace::encode_record(
        trace::AllocRecord{2 * i, 0, 0x1000 + i, 256, MemoryKind::kDevice, 0, 0, 0, 1, 0}, first);
    ++a_count;
  }
  trace::encode_record(
      trace::AllocRecord{2000, 0, 0x9999, 4096, MemoryKind::kDevice, 0, 0, 0, 1, 0}, first);
  ++a_count;
  ASSERT_TRUE(writer->write_block(second, b_count, &error));
  ASSERT_TRUE(writer->write_block(first, a_count, &error));
  writer.reset();
  ProcessReport r = analyze_trace_file(path, {});
  EXPECT_EQ(r.unmatched_frees, 0u);
  EXPECT_EQ(r.leaks.allocations, 1u);
  EXPECT_EQ(r.leaks.bytes, 4096u);
  EXPECT_TRUE(r.trace_error.empty());
}

TEST(ProcessReport, damaged_trace_reports_its_prefix_and_the_error) {
  trace::testing::ScratchDir dir;
  std::string path = dir.file("t.trace");
  std::vector<trace::Record> records;
  records.push_back(trace::ProcessRecord{1, 0, 0, 0, "", "", "", ""});
  for (std::uint64_t i = 0; i < 30; ++i) {
    records.push_back(
        trace::AllocRecord{i, 0, 0x1000 + i, 100, MemoryKind::kDevice, 0, 0, 0, 1, 0});
  }
  trace::testing::write_trace(path, records, 11);  // blocks of 11 records
  auto bytes = trace::testing::file_bytes(path);
  bytes.resize(bytes.size() - 3);
  trace::testing::write_bytes(path, bytes);
  ProcessReport r = analyze_trace_file(path, {});
  EXPECT_NE(r.trace_error.find("truncated block at byte"), std::string::npos);
  EXPECT_GT(r.trace_error_offset, 0u);
  EXPECT_EQ(r.leaks.allocations, 21u);  // the two whole blocks
}

}  // namespace
}  // namespace gpuleak::analysis
