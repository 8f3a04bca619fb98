// The ranks of a multi-node job in one view (analysis/processes/job_ranks.h).
#include "analysis/processes/job_ranks.h"

#include <gtest/gtest.h>

namespace gpuleak::analysis {
namespace {

ProcessReport rank_on(std::int64_t rank, const std::string& host, std::uint32_t pid, bool leaks,
                      const char* launcher = "slurm") {
  ProcessReport r;
  r.process.pid = pid;
  r.process.hostname = host;
  r.distributed = DistributedRank{rank, rank % 2, 4, std::string(launcher)};
  r.allocations = 100;
  r.growth.steps = 200;
  if (leaks) {
    r.growth.verdict = Verdict::kLeak;
    r.growth.rate_bytes_per_step = 1 << 20;
    SiteGrowth site;
    site.site.file = "/job/train.py";
    site.site.line = 42;
    site.site.function = "train_step";
    r.growth.sites.push_back(site);
  } else {
    r.growth.verdict = Verdict::kNoLeak;
  }
  return r;
}

TEST(JobRanks, names_the_leaking_rank_and_its_host_and_the_ranks_that_do_not_leak) {
  // Traces from two hosts, as folders copied from each node; the same pid on both.
  std::vector<ProcessReport> reports = {
      rank_on(2, "node-b", 100, false), rank_on(0, "node-a", 100, false),
      rank_on(3, "node-b", 101, true), rank_on(1, "node-a", 101, false)};
  std::optional<JobRanks> ranks = job_ranks(reports);
  ASSERT_TRUE(ranks.has_value());
  ASSERT_EQ(ranks->ranks.size(), 4u);
  EXPECT_EQ(ranks->ranks[3].rank, 3);
  EXPECT_EQ(ranks->ranks[3].host, "node-b");
  EXPECT_TRUE(ranks->ranks[3].leak);
  EXPECT_EQ(ranks->ranks[3].site, "train.py:42");
  EXPECT_EQ(ranks->hosts, (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_TRUE(ranks->repeated.empty());
  EXPECT_EQ(job_ranks_text(*ranks),
            "4 ranks on 2 hosts (node-a: 0, 1; node-b: 2, 3): rank 3 on node-b (PID 101) leaks "
            "+1.00 MiB/step at train.py:42; ranks 0-2 do not.");
}

TEST(JobRanks, says_when_no_rank_leaks_and_when_a_rank_appears_twice) {
  std::vector<ProcessReport> reports = {rank_on(0, "n1", 1, false), rank_on(1, "n1", 2, false),
                                        rank_on(1, "n2", 3, false)};
  std::optional<JobRanks> ranks = job_ranks(reports);
  ASSERT_TRUE(ranks.has_value());
  EXPECT_EQ(ranks->repeated, (std::vector<std::int64_t>{1}));
  std::string text = job_ranks_text(*ranks);
  EXPECT_NE(text.find("no rank leaks"), std::string::npos) << text;
  EXPECT_NE(text.find("Rank 1 appears more than once"), std::string::npos) << text;
}

TEST(JobRanks, one_rank_or_none_is_no_view) {
  std::vector<ProcessReport> reports = {rank_on(0, "n1", 1, true), ProcessReport{}};
  EXPECT_FALSE(job_ranks(reports).has_value());
}

TEST(JobRanks, rank_ranges_are_compact) {
  EXPECT_EQ(rank_ranges({0, 1, 2, 3, 5, 7, 8}), "0-3, 5, 7, 8");
  EXPECT_EQ(rank_ranges({4}), "4");
  EXPECT_EQ(rank_ranges({}), "");
}

}  // namespace
}  // namespace gpuleak::analysis
