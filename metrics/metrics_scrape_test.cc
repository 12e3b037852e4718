#include "metrics/metrics_scrape.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(ParseMetricsTextTest, SeriesByNameAndLabelsAsPrinted) {
  auto s = ParseMetricsText(
      "# HELP a_total A.\n"
      "# TYPE a_total counter\n"
      "a_total{outcome=\"ok\"} 3\n"
      "a_total{outcome=\"a b\"} 1.5\n"
      "h_bucket{le=\"+Inf\"} 2\n"
      "g -Inf\n"
      "\n"
      "up 1\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->size(), 5u);
  EXPECT_EQ(s->at("a_total{outcome=\"ok\"}"), 3);
  EXPECT_EQ(s->at("a_total{outcome=\"a b\"}"), 1.5);
  EXPECT_EQ(s->at("h_bucket{le=\"+Inf\"}"), 2);
  EXPECT_LT(s->at("g"), 0);
  EXPECT_EQ(s->at("up"), 1);
}

TEST(ParseMetricsTextTest, RefusesALineWithoutAValue) {
  auto s = ParseMetricsText("up 1\nbroken\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("line 2"), std::string::npos) << s.status();
  EXPECT_FALSE(ParseMetricsText("up one\n").ok());
}

TEST(ScrapeMetricsTest, RefusesAnAddressThatIsNotLoopback) {
  auto s = ScrapeMetrics("10.0.0.1:9100");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gputravel
