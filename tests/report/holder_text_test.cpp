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

}  // namespace
}  // namespace gpuleak::report
