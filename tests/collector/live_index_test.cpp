// The collector's in-process growth candidates (collector/live_index.h): a
// stack becomes a candidate after rising at 8 consecutive step boundaries,
// by count or, with its count held, by bytes.
#include "collector/live_index.h"

#include <gtest/gtest.h>

namespace gpuleak::collector {
namespace {

TEST(LiveIndex, a_stack_that_keeps_one_more_allocation_per_step_becomes_a_candidate) {
  LiveIndex index;
  for (std::uint64_t step = 0; step < LiveIndex::kStreak; ++step) {
    index.on_alloc(0x1000 + step * 0x100, 64, 7);
    index.on_boundary();
  }
  auto candidates = index.take_candidates();
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].stack_id, 7u);
  EXPECT_EQ(candidates[0].allocations.size(), static_cast<std::size_t>(LiveIndex::kStreak));
}

TEST(LiveIndex, a_tensor_re_made_bigger_every_step_is_a_candidate_at_its_current_address) {
  // preds = torch.cat((preds, logits)): one live allocation, a bigger one at
  // a new address every step.
  LiveIndex index;
  std::uint64_t address = 0, size = 0;
  for (std::uint64_t step = 0; step < LiveIndex::kStreak + 1; ++step) {
    std::uint64_t next = 0x10000 + step * 0x1000;
    index.on_alloc(next, size + 512, 9);
    if (address) index.on_free(address);
    address = next;
    size += 512;
    index.on_boundary();
  }
  auto candidates = index.take_candidates();
  ASSERT_EQ(candidates.size(), 1u);
  ASSERT_EQ(candidates[0].allocations.size(), 1u);
  EXPECT_EQ(candidates[0].allocations[0].second, (LiveIndex::kStreak)*512u);
}

TEST(LiveIndex, activations_freed_every_step_and_a_same_size_replacement_are_not_candidates) {
  LiveIndex index;
  std::uint64_t kept = 0;
  for (std::uint64_t step = 0; step < 40; ++step) {
    index.on_alloc(0x5000, 4096, 3);  // an activation, freed within the step
    index.on_free(0x5000);
    std::uint64_t next = 0x90000 + step * 0x1000;  // a buffer replaced by one of its size
    index.on_alloc(next, 8192, 4);
    if (kept) index.on_free(kept);
    kept = next;
    index.on_boundary();
  }
  EXPECT_TRUE(index.take_candidates().empty());
}

TEST(LiveIndex, at_exit_a_stack_that_grew_every_other_step_becomes_a_candidate) {
  // A leak of every other step never rises kStreak boundaries in a row; at
  // the program's end it has risen at half of them and holds that many more.
  LiveIndex index;
  for (std::uint64_t step = 0; step < 30; ++step) {
    if (step % 2 == 0) index.on_alloc(0x1000 + step * 0x100, 64, 5);
    index.on_alloc(0x8000, 4096, 6);  // freed within the step: never a candidate
    index.on_free(0x8000);
    index.on_boundary();
  }
  EXPECT_TRUE(index.take_candidates().empty());
  index.on_exit();
  auto candidates = index.take_candidates();
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].stack_id, 5u);
  EXPECT_EQ(candidates[0].allocations.size(), 15u);
  index.on_exit();  // each stack once
  EXPECT_TRUE(index.take_candidates().empty());
}

TEST(LiveIndex, at_exit_a_short_run_names_what_grew_at_each_of_its_few_steps) {
  LiveIndex index;
  for (std::uint64_t step = 0; step < 6; ++step) {
    index.on_alloc(0x1000 + step * 0x100, 64, 7);
    index.on_boundary();
  }
  EXPECT_TRUE(index.take_candidates().empty());  // 6 < kStreak
  index.on_exit();
  auto candidates = index.take_candidates();
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].stack_id, 7u);
}

TEST(LiveIndex, at_exit_a_stack_that_went_up_and_back_down_is_not_a_candidate) {
  LiveIndex index;
  for (std::uint64_t step = 0; step < 12; ++step) {
    if (step < 6) {
      index.on_alloc(0x1000 + step * 0x100, 64, 8);
    } else {
      index.on_free(0x1000 + (step - 6) * 0x100);
    }
    index.on_boundary();
  }
  index.on_exit();
  EXPECT_TRUE(index.take_candidates().empty());
}

}  // namespace
}  // namespace gpuleak::collector
