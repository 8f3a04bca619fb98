#include "report/holder_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/growth/holder_findings.h"
#include "report/json_report.h"
#include "report/text_report.h"

namespace gpuleak::report {
namespace {

// A site's object of a holder annotation (without its site_id) read the
// way the analysis reads it from a trace; nothing when it is not one.
std::optional<analysis::HolderAnswer> answer_of(const std::string& site) {
  analysis::HolderFindings findings;
  if (site.empty() || site[0] != '{') return std::nullopt;
  findings.add_answer(R"({"sites":[{"site_id":1,)" + site.substr(1) + "]}");
  const analysis::HolderFinding* found = findings.find(1);
  if (found == nullptr) return std::nullopt;
  return found->answer;
}

std::string holder_text_of(const std::string& site) { return holder_text(answer_of(site)); }
std::string kept_at_text_of(const std::string& site) { return kept_at_text(answer_of(site)); }

TEST(HolderText, names_type_name_owner_graph_size_and_bound) {
  EXPECT_EQ(holder_text_of(R"({"holder":{"type":"list","name":"losses","owner":"module __main__"},
                            "graph_tensors_per_element":14})"),
            "list `losses` (module __main__), one autograd graph of 14 tensors per element");
  EXPECT_EQ(
      holder_text_of(R"({"holder":{"type":"deque","name":"buf","bounded":true,"maxlen":200}})"),
      "deque `buf`, bounded: maxlen 200");
}

TEST(HolderText, a_holder_from_a_walk_that_ran_out_of_time_says_so) {
  analysis::HolderFindings findings;
  findings.add_answer(R"({"timed_out": true, "sites": [{"site_id": 2, "kind": "tensor",
      "holder": {"type": "Tensor", "name": "?", "owner": "attribute of Parameter"}}]})");
  ASSERT_NE(findings.find(2), nullptr);
  std::string text = holder_text(findings.find(2)->answer);
  EXPECT_EQ(text.rfind("Tensor `?` (attribute of Parameter) (the holder search ran out of time", 0),
            0u)
      << text;
  EXPECT_NE(text.find("GPULEAK_HOLDER_SECONDS"), std::string::npos) << text;
  EXPECT_EQ(holder_text_of(R"({"holder":{"type":"list","name":"losses"}})").find("ran out"),
            std::string::npos);
}

TEST(HolderText, fields_of_the_wrong_type_are_left_out_not_fatal) {
  EXPECT_EQ(holder_text_of(
                R"({"holder":{"type":null,"name":3,"owner":["x"],"bounded":"yes","maxlen":1}})"),
            "?");
  EXPECT_EQ(holder_text_of(R"({"holder":null})"), "");
  EXPECT_EQ(holder_text_of("not json"), "");
  EXPECT_EQ(holder_text_of(""), "");
}

TEST(HolderText, the_live_message_survives_a_malformed_holder) {
  analysis::GrowthReport g;
  g.verdict = analysis::Verdict::kLeak;
  g.rate_bytes_per_step = 4096;
  g.holder = answer_of(R"({"holder":{"type":null}})");
  EXPECT_NE(live_leak_message(g).find("held by ?"), std::string::npos);
}

constexpr const char* kKeptTotalLoss = R"json({"holder": {"type": "Tensor", "name": "total_loss",
    "owner": "local of evaluate (/job/eval.py:60)",
    "kept_at": {"file": "/job/eval.py", "line": 72, "kind": "augmented-assignment",
                "statement": "total_loss += loss  # running sum", "function": "evaluate"}},
    "graph_tensors_per_element": 56})json";

TEST(HolderText, kept_at_names_file_line_statement_variable_and_owner_without_the_comment) {
  EXPECT_EQ(kept_at_text_of(kKeptTotalLoss),
            "eval.py:72  total_loss += loss  (total_loss, local of evaluate)");
}

TEST(HolderText, kept_at_of_an_exception_traceback_names_the_container_where_it_lives) {
  EXPECT_EQ(kept_at_text_of(R"json({"holder": {"type": "list", "name": "failures",
      "owner": "exception traceback", "held_in": "local of train (/job/t.py:40)",
      "kept_at": {"file": "/job/t.py", "line": 49,
                  "statement": "failures.append(sys.exc_info())"}}})json"),
            "t.py:49  failures.append(sys.exc_info())  (failures, local of train)");
}

constexpr const char* kKeptInMeter = R"json({"holder": {"type": "Tensor", "name": "sum",
    "owner": "attribute of AverageMeter",
    "kept_at": {"file": "/job/meters.py", "line": 19, "kind": "augmented-assignment",
                "statement": "self.sum += val * n", "function": "AverageMeter.update",
                "called_from": {"file": "/job/train.py", "line": 88, "function": "train",
                                "statement": "losses.update(loss, images.size(0))  # avg"}}}})json";

TEST(HolderText, a_store_inside_a_method_also_names_the_call_that_runs_it) {
  EXPECT_EQ(kept_at_text_of(kKeptInMeter),
            "meters.py:19  self.sum += val * n  (sum, attribute of AverageMeter); called from "
            "train.py:88  losses.update(loss, images.size(0))");
  nlohmann::json caller = nlohmann::json::parse(kKeptInMeter)["holder"]["kept_at"]["called_from"];
  caller.erase("line");
  nlohmann::json without_line = nlohmann::json::parse(kKeptInMeter);
  without_line["holder"]["kept_at"]["called_from"] = caller;
  EXPECT_EQ(kept_at_text_of(without_line.dump()),
            "meters.py:19  self.sum += val * n  (sum, attribute of AverageMeter)");
}

TEST(HolderText, kept_at_is_empty_without_a_usable_statement) {
  EXPECT_EQ(kept_at_text_of(R"({"holder":{"type":"list","name":"x"}})"), "");
  EXPECT_EQ(kept_at_text_of(R"({"holder":{"kept_at":{"file":"/a.py","line":-3}}})"), "");
  EXPECT_EQ(kept_at_text_of(R"({"holder":{"kept_at":{"file":7,"line":3}}})"), "");
  EXPECT_EQ(kept_at_text_of(R"({"holder":{"kept_at":"a.py:3"}})"), "");
  EXPECT_EQ(kept_at_text_of("not json"), "");
}

TEST(HolderText, a_graph_of_no_saved_tensors_is_not_mentioned) {
  EXPECT_EQ(holder_text_of(R"({"holder":{"type":"list","name":"a","owner":"module __main__"},
                            "graph_tensors_per_element":0})"),
            "list `a` (module __main__)");
}

TEST(HolderText, growth_that_began_inside_warm_up_says_so_instead_of_a_step_number) {
  EXPECT_EQ(growth_start_text(2, 5), "since warm-up");
  EXPECT_EQ(growth_start_text(5, 5), "since warm-up");
  EXPECT_EQ(growth_start_text(6, 5), "since step 6");
}

TEST(HolderText, the_live_message_leads_with_the_keeping_statement_then_the_allocation) {
  analysis::GrowthReport g;
  g.verdict = analysis::Verdict::kLeak;
  g.rate_bytes_per_step = 1 << 20;
  g.first_growing_step = 9;
  g.warmup_steps = 5;
  analysis::SiteGrowth site;
  site.site.file = "/job/model.py";
  site.site.line = 42;
  site.site.source_line = "return self.net(x)";
  g.sites.push_back(site);
  g.holder = answer_of(kKeptTotalLoss);
  std::string message = live_leak_message(g);
  EXPECT_EQ(message.rfind("LEAK +1.00 MiB/step since step 9: kept at eval.py:72  total_loss += "
                          "loss  (total_loss, local of evaluate) -- allocated at model.py:42 "
                          "`return self.net(x)`; held by Tensor `total_loss`",
                          0),
            0u)
      << message;
}

// `report --json` gives the holder answer in the shape the Python package
// wrote it (docs/python.md): every field it writes, always-written ones as
// null when unknown, the sometimes-written ones only when written.
TEST(HolderJson, the_answer_reads_back_as_the_python_package_wrote_it) {
  const std::string full = R"json({"site_id": 1, "matched_addresses": 24, "kind": "tensor",
      "holder": {"type": "list", "name": "failures", "owner": "exception traceback",
                 "path": "train.failures", "length": 9, "bounded": false, "maxlen": null,
                 "held_in": "local of train (/job/t.py:40)", "filled_by": "hook on ReLU",
                 "element": "lambda with `logits` bound as a default",
                 "kept_at": {"file": "/job/t.py", "line": 49, "statement": null,
                             "kind": "append", "function": "train", "in_loop": true}},
      "graph_tensors_per_element": null, "element_has_grad_fn": false,
      "cause": "exception-traceback", "fix": "clear the list"})json";
  const std::string bare = R"json({"site_id": 1, "matched_addresses": 0, "kind": "unknown",
      "holder": null, "graph_tensors_per_element": null, "element_has_grad_fn": false,
      "fix": null, "note": "holder not found within the time budget"})json";
  for (const std::string& site : {full, bare}) {
    analysis::HolderFindings findings;
    findings.add_answer(R"({"sites": [)" + site + "]}");
    ASSERT_NE(findings.find(1), nullptr) << site;
    analysis::ProcessReport report;
    report.growth.holder = findings.find(1)->answer;
    EXPECT_EQ(to_json(report)["growth"]["holder"], nlohmann::json::parse(site));
  }
}

}  // namespace
}  // namespace gpuleak::report
