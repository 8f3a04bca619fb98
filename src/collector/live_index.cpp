#include "collector/live_index.h"

#include <algorithm>
#include <functional>
#include <mutex>

namespace gpuleak::collector {

namespace {
inline std::size_t shard_of(std::uint64_t key, int shards) {
  return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> 59) %
         static_cast<std::size_t>(shards);
}
}  // namespace

void LiveIndex::change(std::uint32_t stack_id, int delta, std::int64_t bytes) {
  CountShard& shard = counts_[shard_of(stack_id, kShards)];
  std::uint64_t epoch = epoch_.load(std::memory_order_relaxed);
  std::lock_guard<SpinLock> lock(shard.lock);
  Count& count = shard.counts[stack_id];
  count.live += delta;
  count.live_bytes += bytes;
  if (count.touched_epoch != epoch) {
    count.touched_epoch = epoch;
    shard.touched.push_back(stack_id);
  }
}

void LiveIndex::on_alloc(std::uint64_t address, std::uint64_t size, std::uint32_t stack_id) {
  AddressShard& shard = addresses_[shard_of(address, kShards)];
  std::uint32_t replaced = 0;
  std::uint64_t replaced_size = 0;
  bool had = false;
  {
    std::lock_guard<SpinLock> lock(shard.lock);
    auto [it, inserted] = shard.entries.try_emplace(address, Entry{stack_id, size});
    if (!inserted) {  // a free we did not see: the old allocation is gone
      had = true;
      replaced = it->second.stack_id;
      replaced_size = it->second.size;
      it->second = Entry{stack_id, size};
    }
  }
  if (had) change(replaced, -1, -static_cast<std::int64_t>(replaced_size));
  change(stack_id, +1, static_cast<std::int64_t>(size));
}

void LiveIndex::on_free(std::uint64_t address) {
  AddressShard& shard = addresses_[shard_of(address, kShards)];
  std::uint32_t stack_id = 0;
  std::uint64_t size = 0;
  {
    std::lock_guard<SpinLock> lock(shard.lock);
    auto it = shard.entries.find(address);
    if (it == shard.entries.end()) return;
    stack_id = it->second.stack_id;
    size = it->second.size;
    shard.entries.erase(it);
  }
  change(stack_id, -1, -static_cast<std::int64_t>(size));
}

void LiveIndex::on_boundary() {
  // Judge every stack changed during the epoch that ends here. A stack that
  // was not changed did not grow, so its streak is over; that is noticed
  // lazily (its last judged boundary is not the previous one).
  std::uint64_t ending = epoch_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::uint32_t> grown;
  for (CountShard& shard : counts_) {
    std::lock_guard<SpinLock> lock(shard.lock);
    for (std::uint32_t stack_id : shard.touched) {
      Count& count = shard.counts[stack_id];
      if (count.boundary_epoch + 1 != ending) count.streak = 0;
      bool rose = count.live > count.at_last_boundary ||
                  (count.live == count.at_last_boundary && count.live > 0 &&
                   count.live_bytes > count.bytes_at_last_boundary);
      if (count.boundary_epoch == ~0ull) count.first_live = count.live;
      count.streak = rose ? count.streak + 1 : 0;
      if (rose) ++count.rises;
      count.at_last_boundary = count.live;
      count.bytes_at_last_boundary = count.live_bytes;
      count.boundary_epoch = ending;
      if (count.streak >= kStreak && !count.reported) {
        count.reported = true;
        grown.push_back(stack_id);
      }
    }
    shard.touched.clear();
  }
  make_pending(std::move(grown));
}

void LiveIndex::on_exit() {
  std::vector<std::pair<std::int64_t, std::uint32_t>> risen;  // (rise, stack)
  for (CountShard& shard : counts_) {
    std::lock_guard<SpinLock> lock(shard.lock);
    for (auto& [stack_id, count] : shard.counts) {
      std::int64_t rise = count.live - count.first_live;
      if (count.reported || count.boundary_epoch == ~0ull || count.rises < kExitRises ||
          rise < kExitRises)
        continue;
      count.reported = true;
      risen.emplace_back(rise, stack_id);
    }
  }
  std::sort(risen.begin(), risen.end(), std::greater<>());
  std::vector<std::uint32_t> grown;
  grown.reserve(risen.size());
  for (const auto& [rise, stack_id] : risen) grown.push_back(stack_id);
  make_pending(std::move(grown));
}

void LiveIndex::make_pending(std::vector<std::uint32_t> grown) {
  if (grown.empty()) return;
  {
    std::lock_guard<SpinLock> lock(pending_lock_);
    if (reported_total_ >= kMaxCandidates) return;
    std::size_t room = kMaxCandidates - reported_total_;
    if (grown.size() > room) grown.resize(room);
    reported_total_ += grown.size();
  }
  std::vector<GrowthCandidate> found;
  found.reserve(grown.size());
  for (std::uint32_t stack_id : grown) found.push_back(GrowthCandidate{stack_id, {}});
  for (AddressShard& shard : addresses_) {
    std::lock_guard<SpinLock> lock(shard.lock);
    for (const auto& [address, entry] : shard.entries) {
      for (GrowthCandidate& candidate : found) {
        if (candidate.stack_id == entry.stack_id &&
            candidate.allocations.size() < kMaxAllocationsPerCandidate) {
          candidate.allocations.emplace_back(address, entry.size);
        }
      }
    }
  }
  std::lock_guard<SpinLock> lock(pending_lock_);
  for (auto& candidate : found) pending_.push_back(std::move(candidate));
}

std::vector<GrowthCandidate> LiveIndex::take_candidates() {
  std::lock_guard<SpinLock> lock(pending_lock_);
  std::vector<GrowthCandidate> out;
  out.swap(pending_);
  return out;
}

}  // namespace gpuleak::collector
