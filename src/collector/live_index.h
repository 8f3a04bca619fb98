// Which stack made each live tensor-level allocation, and how many live
// allocations each stack holds, so that the traced process itself can
// notice a site that grows step after step and ask its Python package who
// holds the memory, right away. (`gpuleak run` finds the same sites from the
// trace, but only after the data reached it: too late for a short job.)
//
// Thread-safe: sharded, each shard behind its own spin lock.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "collector/spin_lock.h"

namespace gpuleak::collector {

struct GrowthCandidate {
  std::uint32_t stack_id = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> allocations;  // [address, size], newest last
};

class LiveIndex {
 public:
  // A stack whose live count rose at this many consecutive step boundaries
  // becomes a candidate (once); so does one whose count held while its live
  // bytes rose (a tensor re-made bigger every step, preds = torch.cat((preds,
  // logits)): the holder walk must see it at the boundary that found it,
  // since the next step frees it for a bigger one at another address).
  static constexpr int kStreak = 8;
  static constexpr std::size_t kMaxCandidates = 16;
  static constexpr std::size_t kMaxAllocationsPerCandidate = 64;

  void on_alloc(std::uint64_t address, std::uint64_t size, std::uint32_t stack_id);
  void on_free(std::uint64_t address);

  // A step boundary: moves new candidates into the pending list.
  void on_boundary();
  // The program is ending (or its loop ended) before any candidate was
  // walked: stacks that rose at kExitRises boundaries or more, not in a row
  // (a leak every other step, a run too short for kStreak), and hold at
  // least kExitRises more allocations than at the first boundary that
  // judged them, become candidates too (pending, largest rise first).
  void on_exit();
  static constexpr int kExitRises = 4;
  // Takes the pending candidates.
  std::vector<GrowthCandidate> take_candidates();

 private:
  static constexpr int kShards = 32;
  struct Entry {
    std::uint32_t stack_id;
    std::uint64_t size;
  };
  struct AddressShard {
    SpinLock lock;
    std::unordered_map<std::uint64_t, Entry> entries;
  };
  struct Count {
    std::int64_t live = 0;
    std::int64_t at_last_boundary = 0;
    std::int64_t live_bytes = 0;
    std::int64_t bytes_at_last_boundary = 0;
    std::uint64_t touched_epoch = ~0ull;   // epoch of the last change
    std::uint64_t boundary_epoch = ~0ull;  // epoch whose boundary last judged it
    int streak = 0;
    int rises = 0;                // boundaries at which it rose, in a row or not
    std::int64_t first_live = 0;  // live at the first boundary that judged it
    bool reported = false;
  };
  struct CountShard {
    SpinLock lock;
    std::unordered_map<std::uint32_t, Count> counts;
    std::vector<std::uint32_t> touched;  // stacks changed during the current epoch
  };
  void change(std::uint32_t stack_id, int delta, std::int64_t bytes);
  // Moves `grown` (up to the room left of kMaxCandidates) into pending_ with
  // their live allocations.
  void make_pending(std::vector<std::uint32_t> grown);

  AddressShard addresses_[kShards];
  CountShard counts_[kShards];
  std::atomic<std::uint64_t> epoch_{0};
  SpinLock pending_lock_;
  std::vector<GrowthCandidate> pending_;
  std::size_t reported_total_ = 0;  // guarded by pending_lock_
};

}  // namespace gpuleak::collector
