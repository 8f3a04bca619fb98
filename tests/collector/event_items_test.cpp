// The items a recording thread hands the writer (collector/event_items.h):
// whatever goes in comes out as the same trace records, in order, and a
// range that does not hold whole items is refused, not misread.
#include "collector/event_items.h"

#include <gtest/gtest.h>

#include <vector>

#include "trace/codec.h"

namespace gpuleak::collector {
namespace {

std::vector<trace::Record> decode_all(const std::string& bytes) {
  std::vector<trace::Record> out;
  const auto* at = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const auto* end = at + bytes.size();
  while (at < end) {
    trace::Record record;
    if (trace::decode_record(&at, end, record) != trace::DecodeStatus::kRecord) break;
    out.push_back(record);
  }
  return out;
}

struct Items {
  std::string bytes;
  std::vector<trace::Record> expected;
};

Items some_items() {
  trace::AllocRecord alloc;
  alloc.seq = 7;
  alloc.time_ns = 123456789;
  alloc.address = 0x7f0000001000;
  alloc.size = 1 << 20;
  alloc.kind = trace::MemoryKind::kDeviceAsync;
  alloc.api = 516;
  alloc.device = 1;
  alloc.stream = 0x55;
  alloc.thread_id = 4242;
  alloc.stack_id = 3;
  trace::FreeRecord free;
  free.seq = 8;
  free.time_ns = 123456999;
  free.address = alloc.address;
  free.kind = alloc.kind;
  free.api = 518;
  free.device = 1;
  free.thread_id = 4242;
  trace::ThreadRecord thread{4242, "worker"};
  trace::AnnotationRecord note{9, 1, "key", "value"};
  std::string encoded;
  trace::encode_record(thread, encoded);
  trace::encode_record(note, encoded);

  Items items;
  items.bytes.resize(kEncodedItemHeaderBytes + encoded.size() + kAllocItemBytes + kFreeItemBytes);
  char* at = items.bytes.data();
  at = write_encoded_item(at, encoded, 2);
  at = write_alloc_item(at, alloc);
  at = write_free_item(at, free);
  EXPECT_EQ(at, items.bytes.data() + items.bytes.size());
  items.expected = {thread, note, alloc, free};
  return items;
}

TEST(EventItems, encoded_records_and_copied_events_come_out_as_the_same_records_in_order) {
  Items items = some_items();
  std::string out;
  std::uint32_t records = 0;
  ASSERT_TRUE(translate_items(items.bytes, out, records));
  EXPECT_EQ(records, 4u);
  EXPECT_EQ(decode_all(out), items.expected);
}

TEST(EventItems, a_range_cut_inside_an_item_is_refused_after_the_whole_items_before_it) {
  Items items = some_items();
  for (std::size_t cut = 1; cut < items.bytes.size(); ++cut) {
    std::string out;
    std::uint32_t records = 0;
    bool whole = translate_items(std::string_view(items.bytes).substr(0, cut), out, records);
    std::size_t boundary_alloc = items.bytes.size() - kFreeItemBytes - kAllocItemBytes;
    std::size_t boundary_free = items.bytes.size() - kFreeItemBytes;
    EXPECT_EQ(whole, cut == boundary_alloc || cut == boundary_free) << "cut at " << cut;
    EXPECT_EQ(decode_all(out).size(), records) << "cut at " << cut;
  }
}

TEST(EventItems, an_unknown_item_kind_is_refused) {
  std::string bytes(1 + sizeof(trace::FreeRecord), '\0');
  bytes[0] = 9;
  std::string out;
  std::uint32_t records = 0;
  EXPECT_FALSE(translate_items(bytes, out, records));
  EXPECT_EQ(records, 0u);
}

}  // namespace
}  // namespace gpuleak::collector
