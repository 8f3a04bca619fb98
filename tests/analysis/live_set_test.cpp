// The live set against a plain map under a long random mix of allocations,
// frees, frees of unknown addresses and allocations that replace a live
// entry, over every address space: the same entries, counts and byte totals
// after every step (the table shifts entries back on delete, which must
// never lose one).
#include "analysis/model/live_set.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace gpuleak::analysis {
namespace {

using trace::MemoryKind;

TEST(LiveSet, agrees_with_a_plain_map_over_a_million_random_operations) {
  const MemoryKind kinds[] = {MemoryKind::kDevice,     MemoryKind::kDeviceAsync,
                              MemoryKind::kTorchBlock, MemoryKind::kVmmPhysical,
                              MemoryKind::kVmmMapping, MemoryKind::kAddressRange,
                              MemoryKind::kArray,      MemoryKind::kHostPinned};
  auto space = [](MemoryKind k) {
    switch (k) {
      case MemoryKind::kVmmPhysical:
        return 1;
      case MemoryKind::kVmmMapping:
        return 2;
      case MemoryKind::kAddressRange:
        return 3;
      case MemoryKind::kArray:
        return 4;
      case MemoryKind::kTorchBlock:
        return 5;
      default:
        return 0;
    }
  };
  std::mt19937_64 random(42);
  LiveSet live;
  std::map<std::pair<int, std::uint64_t>, std::uint64_t> expected;  // -> size
  std::uint64_t expected_bytes = 0;
  std::vector<std::pair<MemoryKind, std::uint64_t>> made;
  for (std::uint64_t i = 0; i < 1'000'000; ++i) {
    MemoryKind kind = kinds[random() % 8];
    // Few distinct addresses, aligned like real ones: many collisions and
    // long probe runs.
    std::uint64_t address = 0x7f0000000000ull + (random() % 20000) * 512;
    if (random() % 3 != 0 || made.empty()) {
      trace::AllocRecord a;
      a.seq = i;
      a.address = address;
      a.size = 512 * (1 + random() % 64);
      a.kind = kind;
      auto key = std::make_pair(space(kind), address);
      bool had = expected.count(key) > 0;
      if (had) expected_bytes -= expected[key];
      expected[key] = a.size;
      expected_bytes += a.size;
      ASSERT_EQ(live.add(a, 0), had) << i;
      made.emplace_back(kind, address);
    } else {
      auto [k, addr] = made[random() % made.size()];
      if (random() % 4 == 0) addr += 256;  // an address never handed out
      trace::FreeRecord f;
      f.address = addr;
      f.kind = k;
      auto key = std::make_pair(space(k), addr);
      auto it = expected.find(key);
      auto removed = live.remove(f);
      ASSERT_EQ(removed.has_value(), it != expected.end()) << i;
      if (removed) {
        EXPECT_EQ(removed->size, it->second);
        expected_bytes -= it->second;
        expected.erase(it);
      }
    }
    ASSERT_EQ(live.count(), expected.size()) << i;
    ASSERT_EQ(live.bytes(), expected_bytes) << i;
  }
  std::uint64_t visited = 0, visited_bytes = 0;
  live.for_each([&](const LiveAllocation& a) {
    ++visited;
    visited_bytes += a.size;
    EXPECT_EQ(expected.at({space(a.kind), a.address}), a.size);
  });
  EXPECT_EQ(visited, expected.size());
  EXPECT_EQ(visited_bytes, expected_bytes);
}

TEST(LiveSet, memory_follows_the_live_set_not_its_peak) {
  // A burst of a million live blocks, all freed again, then a small steady
  // working set: the table gives the burst's memory back.
  LiveSet live;
  trace::AllocRecord a;
  a.kind = MemoryKind::kTorchBlock;
  a.size = 512;
  for (std::uint64_t i = 0; i < 1'000'000; ++i) {
    a.address = 0x7f0000000000ull + i * 512;
    live.add(a, 0);
  }
  EXPECT_GE(live.slot_count(), 1'000'000u);
  trace::FreeRecord f;
  f.kind = MemoryKind::kTorchBlock;
  for (std::uint64_t i = 0; i < 1'000'000; ++i) {
    f.address = 0x7f0000000000ull + i * 512;
    ASSERT_TRUE(live.remove(f).has_value()) << i;
  }
  EXPECT_EQ(live.count(), 0u);
  EXPECT_LE(live.slot_count(), 2048u);
  for (std::uint64_t i = 0; i < 100; ++i) {
    a.address = 0x7e0000000000ull + i * 4096;
    live.add(a, 0);
  }
  EXPECT_EQ(live.count(), 100u);
  EXPECT_EQ(live.bytes(), 100u * 512);
  EXPECT_LE(live.slot_count(), 2048u);
}

TEST(LiveSet, a_million_stale_entries_cost_at_most_80_bytes_each) {
  // A lossy trace from an allocator that never hands an address out twice
  // keeps every allocation whose free was lost: what each one costs is what
  // such a report's memory grows by (bench/run_report_scaling.py,
  // lossy-fresh). A table of whole 64-byte entries at 35-70 % load costs
  // 91-183 bytes each.
  LiveSet live;
  trace::AllocRecord a;
  a.kind = MemoryKind::kTorchBlock;
  a.size = 512;
  for (std::uint64_t n : {1'000'000ull, 1'500'000ull}) {
    for (std::uint64_t i = live.count(); i < n; ++i) {
      a.address = 0x7f0000000000ull + i * 512;
      a.seq = i;
      live.add(a, i / 100);
    }
    ASSERT_EQ(live.count(), n);
    EXPECT_LE(live.memory_bytes(), 80 * n) << n;
  }
  // Every entry is still found after the index doubled, with its fields.
  trace::FreeRecord f;
  f.kind = MemoryKind::kTorchBlock;
  for (std::uint64_t i = 0; i < 1'500'000; i += 7) {
    f.address = 0x7f0000000000ull + i * 512;
    auto removed = live.remove(f);
    ASSERT_TRUE(removed.has_value()) << i;
    EXPECT_EQ(removed->seq, i);
    EXPECT_EQ(removed->step_index, i / 100);
  }
}

}  // namespace
}  // namespace gpuleak::analysis
