#include "report/holder_text.h"

#include <gtest/gtest.h>

#include "report/text_report.h"

namespace gpuleak::report {
namespace {

TEST(HolderText, names_type_name_owner_graph_size_and_bound) {
  EXPECT_EQ(holder_text(R"({"holder":{"type":"list","name":"losses","owner":"module __main__"},
                            "graph_tensors_per_element":14})"),
            "list `losses` (module __main__), one autograd graph of 14 tensors per element");
  EXPECT_EQ(holder_text(R"({"holder":{"type":"deque","name":"buf","bounded":true,"maxlen":200}})"),
            "deque `buf`, bounded: maxlen 200");
}

TEST(HolderText, fields_of_the_wrong_type_are_left_out_not_fatal) {
  EXPECT_EQ(
      holder_text(R"({"holder":{"type":null,"name":3,"owner":["x"],"bounded":"yes","maxlen":1}})"),
      "?");
  EXPECT_EQ(holder_text(R"({"holder":null})"), "");
  EXPECT_EQ(holder_text("not json"), "");
  EXPECT_EQ(holder_text(""), "");
}

TEST(HolderText, the_live_message_survives_a_malformed_holder) {
  analysis::GrowthReport g;
  g.verdict = analysis::Verdict::kLeak;
  g.rate_bytes_per_step = 4096;
  g.holder_json = R"({"holder":{"type":null}})";
  EXPECT_NE(live_leak_message(g).find("held by ?"), std::string::npos);
}

constexpr const char* kKeptTotalLoss = R"json({"holder": {"type": "Tensor", "name": "total_loss",
    "owner": "local of evaluate (/job/eval.py:60)",
    "kept_at": {"file": "/job/eval.py", "line": 72, "kind": "augmented-assignment",
                "statement": "total_loss += loss  # running sum", "function": "evaluate"}},
    "graph_tensors_per_element": 56})json";

TEST(HolderText, kept_at_names_file_line_statement_variable_and_owner_without_the_comment) {
  EXPECT_EQ(kept_at_text(kKeptTotalLoss),
            "eval.py:72  total_loss += loss  (total_loss, local of evaluate)");
}

TEST(HolderText, kept_at_of_an_exception_traceback_names_the_container_where_it_lives) {
  EXPECT_EQ(kept_at_text(R"json({"holder": {"type": "list", "name": "failures",
      "owner": "exception traceback", "held_in": "local of train (/job/t.py:40)",
      "kept_at": {"file": "/job/t.py", "line": 49,
                  "statement": "failures.append(sys.exc_info())"}}})json"),
            "t.py:49  failures.append(sys.exc_info())  (failures, local of train)");
}

TEST(HolderText, kept_at_is_empty_without_a_usable_statement) {
  EXPECT_EQ(kept_at_text(R"({"holder":{"type":"list","name":"x"}})"), "");
  EXPECT_EQ(kept_at_text(R"({"holder":{"kept_at":{"file":"/a.py","line":-3}}})"), "");
  EXPECT_EQ(kept_at_text(R"({"holder":{"kept_at":{"file":7,"line":3}}})"), "");
  EXPECT_EQ(kept_at_text(R"({"holder":{"kept_at":"a.py:3"}})"), "");
  EXPECT_EQ(kept_at_text("not json"), "");
}

TEST(HolderText, a_graph_of_no_saved_tensors_is_not_mentioned) {
  EXPECT_EQ(holder_text(R"({"holder":{"type":"list","name":"a","owner":"module __main__"},
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
  g.holder_json = kKeptTotalLoss;
  std::string message = live_leak_message(g);
  EXPECT_EQ(message.rfind("LEAK +1.00 MiB/step since step 9: kept at eval.py:72  total_loss += "
                          "loss  (total_loss, local of evaluate) -- allocated at model.py:42 "
                          "`return self.net(x)`; held by Tensor `total_loss`",
                          0),
            0u)
      << message;
}

}  // namespace
}  // namespace gpuleak::report
