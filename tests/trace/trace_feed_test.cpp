// The one trace-reading loop (trace/trace_feed.h): records handed out in
// the order they happened, a file followed while it grows, damage that ends
// reading with the records before it kept, a trace with no record refused.
#include "trace/trace_feed.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trace/codec.h"
#include "trace/trace_test_files.h"
#include "trace/trace_writer.h"

namespace gpuleak::trace {
namespace {

using testing::ScratchDir;
using testing::write_trace;

ProcessRecord process(std::uint32_t pid) {
  return ProcessRecord{pid, 1, 0, 0, "/bin/a", "a", "host", "0.1.0"};
}

Record alloc(std::uint64_t seq) {
  AllocRecord a;
  a.seq = seq;
  a.time_ns = 1'000'000'000 + seq;
  a.address = 0x1000 + seq;
  a.size = 64;
  return a;
}

void append_block(const std::string& path, const std::vector<Record>& records) {
  std::string error;
  auto writer = TraceWriter::append_to(path, &error);
  ASSERT_TRUE(writer) << error;
  std::string block;
  for (const Record& r : records) encode_record(r, block);
  ASSERT_TRUE(writer->write_block(block, static_cast<std::uint32_t>(records.size()), &error))
      << error;
}

// Sequence numbers of the events `feed` hands out (definitions as 1000 + pid).
struct Collected {
  std::vector<std::uint64_t> order;
  TraceFeed::Consumer consumer() {
    return [this](const Record& r) {
      std::uint64_t seq = 0;
      if (record_seq(r, &seq)) order.push_back(seq);
      if (const auto* p = std::get_if<ProcessRecord>(&r)) order.push_back(1000 + p->pid);
    };
  }
};

TEST(TraceFeed, hands_out_events_in_sequence_order_across_blocks) {
  ScratchDir dir;
  std::string path = dir.file("a.trace");
  write_trace(path, {process(7), alloc(2), alloc(0), alloc(3), alloc(1)}, 2);
  TraceFeed feed(path);
  Collected got;
  feed.read(got.consumer());
  feed.finish(got.consumer());
  EXPECT_EQ(got.order, (std::vector<std::uint64_t>{1007, 0, 1, 2, 3}));
  EXPECT_FALSE(feed.error());
  EXPECT_TRUE(feed.damage().empty());
}

TEST(TraceFeed, follows_a_trace_while_it_grows) {
  ScratchDir dir;
  std::string path = dir.file("a.trace");
  write_trace(path, {process(7), alloc(0), alloc(1)}, 3);
  TraceFeed feed(path, /*follow=*/true);
  Collected got;
  feed.read(got.consumer());
  EXPECT_EQ(got.order, (std::vector<std::uint64_t>{1007, 0, 1}));
  feed.read(got.consumer());  // nothing new: no error, nothing handed out
  EXPECT_EQ(got.order.size(), 3u);
  append_block(path, {alloc(2), alloc(3)});
  feed.read(got.consumer());
  EXPECT_EQ(got.order, (std::vector<std::uint64_t>{1007, 0, 1, 2, 3}));
  EXPECT_FALSE(feed.error());
}

TEST(TraceFeed, another_process_appended_ends_reading_with_the_records_before_it) {
  ScratchDir dir;
  std::string path = dir.file("a.trace");
  write_trace(path, {process(7), alloc(0), alloc(1)}, 3);
  append_block(path, {process(8), alloc(0)});
  TraceFeed feed(path);
  Collected got;
  feed.read(got.consumer());
  feed.finish(got.consumer());
  EXPECT_EQ(got.order, (std::vector<std::uint64_t>{1007, 0, 1}));
  ASSERT_TRUE(feed.error());
  EXPECT_NE(std::string(feed.error()->what()).find("the trace of another process (pid 8)"),
            std::string::npos)
      << feed.error()->what();
  feed.read(got.consumer());  // once stopped, it stays stopped
  EXPECT_EQ(got.order.size(), 3u);
}

TEST(TraceFeed, a_trace_with_only_its_header_is_refused_at_the_end) {
  ScratchDir dir;
  std::string path = dir.file("a.trace");
  write_trace(path, {}, 1);
  TraceFeed feed(path);
  Collected got;
  feed.read(got.consumer());
  EXPECT_THROW(feed.finish(got.consumer()), TraceError);
}

TEST(TraceFeed, a_file_that_is_not_a_trace_throws_from_read_and_may_be_retried) {
  ScratchDir dir;
  std::string path = dir.file("a.trace");
  TraceFeed feed(path, /*follow=*/true);
  Collected got;
  EXPECT_THROW(feed.read(got.consumer()), TraceError);  // not there yet
  EXPECT_FALSE(feed.opened());
  write_trace(path, {process(7), alloc(0)}, 2);
  feed.read(got.consumer());
  EXPECT_TRUE(feed.opened());
  EXPECT_EQ(got.order, (std::vector<std::uint64_t>{1007, 0}));
}

}  // namespace
}  // namespace gpuleak::trace
