// The ring queue against std::deque under a random mix of pushes and pops
// that makes it grow, wrap around and shrink: the same elements, in the same
// order, after every operation.
#include "trace/ring_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <string>

namespace gpuleak::trace {
namespace {

TEST(RingQueue, agrees_with_a_deque_through_growth_wraparound_and_shrinking) {
  RingQueue<std::string> ring;
  std::deque<std::string> reference;
  std::mt19937_64 random(19);
  std::size_t largest_capacity = 0;
  std::uint64_t next = 0;
  // Phases: fill far past the shrink threshold, drain to nearly empty (the
  // queue must give its memory back), then hover around a small size.
  for (int phase = 0; phase < 3; ++phase) {
    for (int op = 0; op < 200'000; ++op) {
      double push_share = phase == 0 ? 0.8 : phase == 1 ? 0.2 : 0.5;
      if (reference.empty() || std::uniform_real_distribution<>(0, 1)(random) < push_share) {
        std::string value = std::to_string(next++);
        ring.push_back(value);
        reference.push_back(value);
      } else {
        ASSERT_EQ(ring.front(), reference.front());
        std::string taken = std::move(ring.front());
        ring.pop_front();
        reference.pop_front();
      }
      ASSERT_EQ(ring.size(), reference.size());
      ASSERT_EQ(ring.empty(), reference.empty());
      if (!reference.empty()) {
        ASSERT_EQ(ring.back(), reference.back());
        std::size_t i = std::uniform_int_distribution<std::size_t>(0, reference.size() - 1)(random);
        ASSERT_EQ(ring[i], reference[i]) << "index " << i << " of " << reference.size();
      }
      largest_capacity = std::max(largest_capacity, ring.capacity());
    }
  }
  for (std::size_t i = 0; i < reference.size(); ++i) ASSERT_EQ(ring[i], reference[i]);
  // It grew well past the threshold, and shrank once mostly drained.
  EXPECT_GT(largest_capacity, std::size_t{1} << 16);
  EXPECT_LE(ring.capacity(), std::max<std::size_t>(16 * reference.size(), std::size_t{1} << 14))
      << "holding " << reference.size() << " in " << ring.capacity() << " slots";
}

}  // namespace
}  // namespace gpuleak::trace
