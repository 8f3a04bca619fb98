// Sites whose allocation count stays flat while their bytes go up and down:
// a bounded cache of entries of varying sizes is not a leak, a buffer that
// keeps being replaced by a bigger one is.
//
// The cache is examples/loops/control_lru_cache_bounded.py as its trace
// looks (from the program's code): a decode loop draws a batch size from
// 1..64, keeps its query and keys until the next iteration rebinds them, and
// asks an lru_cache(maxsize=16) for an index table of (batch + 1) x 32 int32
// and a workspace of batch x 64 KiB; past 16 entries every miss frees the
// least recently used entry's two tensors.
#include <gtest/gtest.h>

#include <list>
#include <map>
#include <random>

#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;

struct CacheEntry {
  std::uint64_t indptr = 0, workspace = 0;
};

ProcessReport lru_decode_loop(std::uint32_t seed, int iterations) {
  SyntheticTrace t;
  auto query_site = t.python_site("/work/control_lru_cache_bounded.py", 72, "main");
  auto keys_site = t.python_site("/work/control_lru_cache_bounded.py", 73, "main");
  auto indptr_site = t.python_site("/work/control_lru_cache_bounded.py", 51, "split_tables");
  auto workspace_site = t.python_site("/work/control_lru_cache_bounded.py", 52, "split_tables");
  auto scores_site = t.python_site("/work/control_lru_cache_bounded.py", 59, "decode_step");
  std::mt19937 arrivals(seed);
  std::uniform_int_distribution<std::uint64_t> batch_sizes(1, 64);
  std::list<std::uint64_t> recency;  // most recently used first
  std::map<std::uint64_t, CacheEntry> cache;
  std::uint64_t query = 0, keys = 0;
  for (int i = 0; i < iterations; ++i) {
    std::uint64_t batch = batch_sizes(arrivals);
    std::uint64_t next_query = t.alloc(query_site, batch * 64 * 4);
    if (query) t.free(query);
    query = next_query;
    std::uint64_t next_keys = t.alloc(keys_site, batch * 128 * 64 * 4);
    if (keys) t.free(keys);
    keys = next_keys;
    auto hit = cache.find(batch);
    if (hit != cache.end()) {
      recency.remove(batch);
    } else {
      if (cache.size() == 16) {
        std::uint64_t evicted = recency.back();
        recency.pop_back();
        t.free(cache[evicted].indptr);
        t.free(cache[evicted].workspace);
        cache.erase(evicted);
      }
      CacheEntry entry;
      entry.indptr = t.alloc(indptr_site, (batch + 1) * 32 * 4);
      entry.workspace = t.alloc(workspace_site, batch * 16384 * 4);
      cache[batch] = entry;
    }
    recency.push_front(batch);
    std::uint64_t scores = t.alloc(scores_site, batch * 128 * 4);
    std::uint64_t softmax = t.alloc(scores_site, batch * 128 * 4);
    t.free(softmax);
    t.free(scores);
    t.advance_ms(2);
    t.step(static_cast<std::uint64_t>(i));
  }
  return t.analyze().build_report("lru-decode-loop");
}

TEST(BoundedCacheVerdict, an_lru_cache_of_varying_sizes_is_not_a_leak) {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    ProcessReport r = lru_decode_loop(seed, 800);
    // 800 iterations of a full cache: enough to say NO LEAK, not NOT YET.
    EXPECT_EQ(r.growth.verdict, Verdict::kNoLeak)
        << "seed " << seed << ": "
        << (r.growth.sites.empty() ? std::string("?") : r.growth.sites[0].site.label()) << " "
        << r.growth.rate_bytes_per_step << " B/iteration";
  }
}

TEST(BoundedCacheVerdict, a_buffer_replaced_by_a_bigger_one_with_jitter_is_a_leak) {
  // One live buffer (the count never changes), replaced every iteration by
  // one 64 KiB bigger on average, give or take up to 96 KiB: some
  // iterations shrink it, most grow it (a concatenation that also trims).
  SyntheticTrace t;
  auto site = t.python_site("/work/serve.py", 40, "serve");
  std::mt19937 noise(11);
  std::uniform_int_distribution<std::int64_t> jitter(-96 * 1024, 96 * 1024);
  std::int64_t size = 1 << 20;
  std::uint64_t buffer = t.alloc(site, static_cast<std::uint64_t>(size));
  for (int i = 0; i < 300; ++i) {
    size = std::max<std::int64_t>(4096, size + 64 * 1024 + jitter(noise));
    std::uint64_t bigger = t.alloc(site, static_cast<std::uint64_t>(size));
    t.free(buffer);
    buffer = bigger;
    t.advance_ms(5);
    t.step(static_cast<std::uint64_t>(i));
  }
  ProcessReport r = t.analyze().build_report("growing-buffer");
  ASSERT_EQ(r.growth.verdict, Verdict::kLeak) << r.growth.cause_text;
  ASSERT_FALSE(r.growth.sites.empty());
  EXPECT_EQ(r.growth.sites[0].site.label(), "serve.py:40");
  EXPECT_NEAR(r.growth.rate_bytes_per_step, 64 * 1024, 16 * 1024);
}

}  // namespace
}  // namespace gpuleak::analysis
