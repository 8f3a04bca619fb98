// The cause of a leak from the growing sites and the holder the Python
// package named (analysis/leak_cause.h), and how holder answers for the same
// site replace each other (analysis/holder_findings.h).
#include "analysis/leak_cause.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/holder_findings.h"
#include "gpuleak/vocabulary.h"

namespace gpuleak::analysis {
namespace {

using vocabulary::Cause;
using vocabulary::cause_slug;

SiteGrowth tensor_site(std::uint32_t id, double allocations_per_step) {
  SiteGrowth s;
  s.site_id = id;
  s.tensor_level = true;
  s.allocations_per_step = allocations_per_step;
  return s;
}

TEST(LeakCause, one_tensor_site_without_a_holder_is_tensors_kept_alive) {
  LeakCause c = leak_cause({tensor_site(1, 1)}, nullptr);
  EXPECT_EQ(c.cause, cause_slug(Cause::kTensorsKeptAlive));
  EXPECT_NE(c.fix.find(".item()"), std::string::npos);
}

TEST(LeakCause, three_tensor_sites_growing_by_alike_counts_are_one_kept_graph) {
  LeakCause c = leak_cause({tensor_site(1, 1), tensor_site(2, 2), tensor_site(3, 3)}, nullptr);
  EXPECT_EQ(c.cause, cause_slug(Cause::kAutogradGraphKeptAlive));
}

TEST(LeakCause, three_tensor_sites_growing_by_unlike_counts_are_not_a_graph) {
  LeakCause c = leak_cause({tensor_site(1, 1), tensor_site(2, 1), tensor_site(3, 4)}, nullptr);
  EXPECT_EQ(c.cause, cause_slug(Cause::kTensorsKeptAlive));
}

TEST(LeakCause, a_driver_allocation_at_the_top_is_outside_the_tensor_allocator) {
  SiteGrowth driver = tensor_site(1, 1);
  driver.tensor_level = false;
  LeakCause c = leak_cause({driver}, nullptr);
  EXPECT_EQ(c.cause, cause_slug(Cause::kNonTensorDriverAllocations));
  EXPECT_EQ(c.fix, "free the buffers allocated at the frames shown, or reuse one buffer");
}

TEST(LeakCause, the_holder_decides_the_cause_and_its_fix_wins) {
  HolderFinding graph;
  graph.kind = "graph";
  graph.fix = "call .detach() on `hidden`";
  LeakCause c = leak_cause({tensor_site(1, 1)}, &graph);
  EXPECT_EQ(c.cause, cause_slug(Cause::kAutogradGraphKeptAlive));
  EXPECT_EQ(c.fix, "call .detach() on `hidden`");

  HolderFinding tensor;
  tensor.kind = "tensor";
  c = leak_cause({tensor_site(1, 1), tensor_site(2, 1), tensor_site(3, 1)}, &tensor);
  EXPECT_EQ(c.cause, cause_slug(Cause::kTensorsKeptAlive));
  EXPECT_NE(c.fix.find("stop keeping the tensors"), std::string::npos);
}

TEST(HolderFindings, reads_the_holder_in_words_and_keeps_a_named_one_over_a_later_empty_one) {
  HolderFindings findings;
  findings.add_answer(
      R"({"sites": [{"site_id": 7, "kind": "tensor", "fix": "clear it",
          "holder": {"type": "list", "name": "losses", "owner": "module __main__",
                     "bounded": false}}]})");
  const HolderFinding* found = findings.find(7);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->description, "list `losses` (module __main__)");
  EXPECT_EQ(found->kind, "tensor");
  EXPECT_EQ(found->fix, "clear it");
  EXPECT_FALSE(found->bounded);

  findings.add_answer(R"({"sites": [{"site_id": 7, "kind": "unknown"}]})");
  ASSERT_NE(findings.find(7), nullptr);
  EXPECT_EQ(findings.find(7)->description, "list `losses` (module __main__)");

  findings.add_answer(
      R"({"sites": [{"site_id": 7, "holder": {"type": "deque", "name": "recent",
          "bounded": true}}]})");
  EXPECT_EQ(findings.find(7)->description, "deque `recent`");
  EXPECT_EQ(findings.find(7)->kind, "unknown");
  EXPECT_TRUE(findings.find(7)->bounded);
}

// A walk that ran out of time names what it reached, which may lie below the
// real holder (a parameter's gradient reached, the optimizer state above it
// not): it never replaces a walk that finished, and one that finished
// replaces it.
TEST(HolderFindings, a_walk_that_finished_wins_over_one_that_ran_out_of_time) {
  const char* finished =
      R"({"sites": [{"site_id": 4, "kind": "tensor",
          "holder": {"type": "defaultdict", "name": "state", "owner": "attribute of Adam"}}]})";
  const char* cut_short =
      R"({"timed_out": true, "sites": [{"site_id": 4, "kind": "tensor",
          "holder": {"type": "Tensor", "name": "?", "owner": "attribute of Parameter"}}]})";
  HolderFindings first_finished;
  first_finished.add_answer(finished);
  first_finished.add_answer(cut_short);
  ASSERT_NE(first_finished.find(4), nullptr);
  EXPECT_EQ(first_finished.find(4)->description, "defaultdict `state` (attribute of Adam)");
  EXPECT_FALSE(first_finished.find(4)->answer.walk_timed_out);

  HolderFindings first_cut;
  first_cut.add_answer(cut_short);
  ASSERT_NE(first_cut.find(4), nullptr);
  EXPECT_TRUE(first_cut.find(4)->answer.walk_timed_out);
  first_cut.add_answer(R"({"sites": [{"site_id": 4, "kind": "unknown"}]})");
  EXPECT_EQ(first_cut.find(4)->description, "Tensor `?` (attribute of Parameter)")
      << "a finished walk that found nothing does not erase a named holder";
  first_cut.add_answer(finished);
  EXPECT_EQ(first_cut.find(4)->description, "defaultdict `state` (attribute of Adam)");
  EXPECT_FALSE(first_cut.find(4)->answer.walk_timed_out);
}

TEST(HolderFindings, skips_sites_a_crafted_answer_spells_wrongly) {
  HolderFindings findings;
  findings.add_answer("not json");
  findings.add_answer(R"({"sites": {"site_id": 1}})");
  findings.add_answer(
      R"({"sites": [3, {"site_id": -1}, {"site_id": 4294967296}, {"site_id": "2"},
          {"site_id": 5, "kind": 9, "holder": {"type": 1, "bounded": "yes"}}]})");
  EXPECT_EQ(findings.find(1), nullptr);
  EXPECT_EQ(findings.find(2), nullptr);
  const HolderFinding* five = findings.find(5);
  ASSERT_NE(five, nullptr);
  EXPECT_EQ(five->kind, "unknown");
  EXPECT_EQ(five->description, "");
  EXPECT_FALSE(five->bounded);

  // `timed_out` of another type than true reads as a walk that finished.
  for (const char* flag : {R"("yes")", "1", "null", "[true]", R"({"x": true})"}) {
    HolderFindings crafted;
    crafted.add_answer(std::string(R"({"timed_out": )") + flag +
                       R"(, "sites": [{"site_id": 6, "holder": {"type": "list"}}]})");
    ASSERT_NE(crafted.find(6), nullptr) << flag;
    EXPECT_FALSE(crafted.find(6)->answer.walk_timed_out) << flag;
  }
}

}  // namespace
}  // namespace gpuleak::analysis
