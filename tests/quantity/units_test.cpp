#include "quantity/units.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpuleak::quantity {
namespace {

// A minute or more is rounded to the nearest second before it is split, so
// 119.5 s is "2 min 0 s", never "1 min 60 s".
TEST(DurationText, rounds_to_the_nearest_second_before_splitting) {
  EXPECT_EQ(format_duration_seconds(60.0), "1 min 0 s");
  EXPECT_EQ(format_duration_seconds(90.4), "1 min 30 s");
  EXPECT_EQ(format_duration_seconds(119.5), "2 min 0 s");
  EXPECT_EQ(format_duration_seconds(3599.6), "1 h 0 min");
  EXPECT_EQ(format_duration_seconds(86400.0 + 7200.0), "1 d 2 h");
}

TEST(DurationText, short_negative_and_endless_durations) {
  EXPECT_EQ(format_duration_seconds(0.25), "250 ms");
  EXPECT_EQ(format_duration_seconds(-3.0), "0 ms");
  EXPECT_EQ(format_duration_seconds(42.0), "42 s");
  EXPECT_EQ(format_duration_seconds(std::numeric_limits<double>::infinity()), "never");
}

}  // namespace
}  // namespace gpuleak::quantity
