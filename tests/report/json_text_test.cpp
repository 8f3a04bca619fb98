#include "report/json_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuleak::report {
namespace {

using nlohmann::json;

TEST(JsonText, valid_documents_are_laid_out_as_nlohmann_dumps_them) {
  json document = {{"schema", "gpuleak-report/1"},
                   {"processes", json::array({{{"pid", 7}, {"name", "caf\xc3\xa9 \xe2\x82\xac"}},
                                              {{"empty", json::array()}, {"none", nullptr}}})},
                   {"rate", 1.5},
                   {"ok", true},
                   {"nested", json::object()},
                   {"escapes", "tab\there \"quoted\" back\\slash \x01 line\nend"}};
  EXPECT_EQ(json_text(document, 2), document.dump(2));
  EXPECT_EQ(json_text(document), document.dump());
}

TEST(JsonText, bytes_that_are_not_utf8_become_pep383_escapes_and_nothing_is_lost) {
  // Latin-1 ö, a lone continuation byte, an overlong '/', a UTF-16
  // surrogate in UTF-8 form, a byte that never starts UTF-8, a cut sequence.
  std::string bytes = "J\xf6rg \x80 \xc0\xaf \xed\xa0\x80 \xf5 \xe2\x82";
  EXPECT_EQ(json_text(json(bytes)),
            "\"J\\udcf6rg \\udc80 \\udcc0\\udcaf \\udced\\udca0\\udc80 \\udcf5 \\udce2\\udc82\"");
  // Valid sequences next to bad bytes stay as they are.
  EXPECT_EQ(json_text(json("\xc3\xa9\xff\xf0\x9f\x98\x80")), "\"\xc3\xa9\\udcff\xf0\x9f\x98\x80\"");
  // Keys too.
  EXPECT_EQ(json_text(json{{"k\xff", 1}}), "{\"k\\udcff\":1}");
}

TEST(JsonText, utf8_sequence_lengths_follow_rfc_3629) {
  EXPECT_EQ(utf8_sequence_bytes("\xc3\xa9", 0), 2u);
  EXPECT_EQ(utf8_sequence_bytes("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(utf8_sequence_bytes("\xf4\x8f\xbf\xbf", 0), 4u);  // U+10FFFF
  EXPECT_EQ(utf8_sequence_bytes("\xf4\x90\x80\x80", 0), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8_sequence_bytes("\xe0\x80\xaf", 0), 0u);      // overlong
  EXPECT_EQ(utf8_sequence_bytes("\xc2", 0), 0u);              // cut
}

}  // namespace
}  // namespace gpuleak::report
