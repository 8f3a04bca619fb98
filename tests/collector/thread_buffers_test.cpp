// A thread's event buffer (collector/thread_buffers.h): what one thread
// commits reaches the writer whole and in order while both run at once,
// across chunk after chunk; a stalled writer makes the thread drop, and
// count, rather than grow without end.
#include "collector/thread_buffers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>

namespace gpuleak::collector {
namespace {

// Item i is (i % 251) + 1 bytes, each byte (i + k) & 0xff.
std::string item(std::uint32_t i) {
  std::string bytes(i % 251 + 1, '\0');
  for (std::size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<char>((i + k) & 0xff);
  return bytes;
}

TEST(ThreadBuffer, committed_bytes_reach_a_concurrent_writer_whole_and_in_order) {
  constexpr std::uint32_t kItems = 400000;  // about 50 MiB, many chunks
  ThreadBuffer buffer(1);
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (std::uint32_t i = 0; i < kItems; ++i) {
      std::string bytes = item(i);
      char* out = nullptr;
      while (!(out = buffer.reserve(bytes.size()))) std::this_thread::yield();  // writer behind
      std::memcpy(out, bytes.data(), bytes.size());
      buffer.commit(bytes.size());
    }
    done.store(true);
  });
  std::string expected;
  for (std::uint32_t i = 0; i < kItems; ++i) expected += item(i);
  std::string received;
  std::uint64_t dropped = 0;
  bool finished = false;
  while (!finished) {
    finished = done.load();  // one more drain after the producer is done
    dropped += buffer.drain([&](std::string_view bytes) { received.append(bytes); });
  }
  producer.join();
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected);
}

TEST(ThreadBuffer, without_a_writer_the_thread_drops_and_counts_beyond_the_cap) {
  ThreadBuffers::set_max_buffer_bytes(48u << 20);  // as GPULEAK_BUFFER_BYTES=50331648 sets it
  ThreadBuffer buffer(1);
  std::string bytes(4096, 'x');
  std::uint64_t written = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {  // 80 MiB, over the 48 MiB cap
    char* out = buffer.reserve(bytes.size());
    if (!out) {
      buffer.drop(1);
      ++refused;
      continue;
    }
    std::memcpy(out, bytes.data(), bytes.size());
    buffer.commit(bytes.size());
    written += bytes.size();
  }
  EXPECT_GT(refused, 0u);
  EXPECT_LE(written, 48u << 20);
  std::uint64_t drained = 0;
  EXPECT_EQ(buffer.drain([&](std::string_view view) { drained += view.size(); }), refused);
  EXPECT_EQ(drained, written);
  // Drained, it takes events again.
  EXPECT_NE(buffer.reserve(bytes.size()), nullptr);
  ThreadBuffers::set_max_buffer_bytes(ThreadBuffers::kMaxBufferBytes);
}

// The numbers of dropped events are kept as ranges for the writer's lost
// record: consecutive numbers join one range, and past the per-thread limit
// the last range widens rather than losing any.
TEST(ThreadBuffer, dropped_numbers_are_kept_as_ranges_for_the_lost_record) {
  ThreadBuffer buffer(1);
  for (std::uint64_t seq = 10; seq < 20; ++seq) buffer.drop(1, seq);
  buffer.drop(3);  // definitions: counted, no number
  buffer.drop(1, 30);
  std::vector<trace::SeqRange> ranges;
  buffer.take_dropped_ranges(ranges);
  EXPECT_EQ(ranges, (std::vector<trace::SeqRange>{{10, 10}, {30, 1}}));
  EXPECT_EQ(buffer.drain([](std::string_view) {}), 14u);
  ranges.clear();
  buffer.take_dropped_ranges(ranges);
  EXPECT_TRUE(ranges.empty()) << "taken once";

  for (std::uint64_t k = 0; k < ThreadBuffer::kMaxDroppedRanges + 5; ++k)
    buffer.drop(1, 100 + 2 * k);
  buffer.take_dropped_ranges(ranges);
  ASSERT_EQ(ranges.size(), ThreadBuffer::kMaxDroppedRanges);
  for (std::uint64_t k = 0; k < ThreadBuffer::kMaxDroppedRanges + 5; ++k) {
    std::uint64_t seq = 100 + 2 * k;
    bool covered = std::any_of(ranges.begin(), ranges.end(), [&](const trace::SeqRange& r) {
      return seq >= r.first_seq && seq < r.first_seq + r.count;
    });
    EXPECT_TRUE(covered) << "dropped number " << seq << " is in no range";
  }
}

TEST(ThreadBuffers, ranges_from_several_threads_are_merged_and_bounded) {
  std::vector<trace::SeqRange> ranges = {{20, 5}, {0, 10}, {10, 5}, {40, 1}};
  merge_seq_ranges(ranges);
  EXPECT_EQ(ranges, (std::vector<trace::SeqRange>{{0, 15}, {20, 5}, {40, 1}}));
  std::vector<trace::SeqRange> many;
  for (std::uint64_t k = 0; k < 5000; ++k) many.push_back({k * 3, 1});
  merge_seq_ranges(many);
  EXPECT_LE(many.size(), kMaxLostRanges);
  EXPECT_EQ(many.front().first_seq, 0u);
  EXPECT_EQ(many.back().first_seq + many.back().count, 4999u * 3 + 1);
}

TEST(ThreadBuffer, a_large_chunk_filling_up_asks_for_the_writer) {
  ThreadBuffer buffer(1);
  std::string bytes(1000, 'y');
  bool woken = false;
  for (int i = 0; i < 20000 && !woken; ++i) {  // chunks grow to 1 MiB within 2 MiB of data
    char* out = buffer.reserve(bytes.size());
    ASSERT_NE(out, nullptr);
    std::memcpy(out, bytes.data(), bytes.size());
    woken = buffer.commit(bytes.size());
  }
  EXPECT_TRUE(woken);
}

}  // namespace
}  // namespace gpuleak::collector
