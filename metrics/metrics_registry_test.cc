#include "metrics/metrics_registry.h"

#include <map>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "metrics/metrics_scrape.h"

namespace gputravel {
namespace {

std::map<std::string, double> Series(const MetricsRegistry& r) {
  auto parsed = ParseMetricsText(r.Text());
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : std::map<std::string, double>{};
}

TEST(MetricsRegistryTest, LabeledCounterShowsEveryValueFromTheStartAndFoldsOthers) {
  MetricsRegistry r;
  MetricCounter c = r.AddCounter("t_trips_total", "Trips.", "outcome", {"ok", "failed"});
  auto s = Series(r);
  EXPECT_EQ(s.at("t_trips_total{outcome=\"ok\"}"), 0);
  EXPECT_EQ(s.at("t_trips_total{outcome=\"failed\"}"), 0);
  EXPECT_EQ(s.at("t_trips_total{outcome=\"other\"}"), 0);
  c.Add("ok");
  c.Add("ok", 2);
  // A value nobody registered adds no series: it is counted as "other".
  c.Add("trip 12345");
  c.Add("failed", -5);  // a counter never goes down
  s = Series(r);
  EXPECT_EQ(s.at("t_trips_total{outcome=\"ok\"}"), 3);
  EXPECT_EQ(s.at("t_trips_total{outcome=\"failed\"}"), 0);
  EXPECT_EQ(s.at("t_trips_total{outcome=\"other\"}"), 1);
  EXPECT_EQ(s.count("t_trips_total{outcome=\"trip 12345\"}"), 0u);
  EXPECT_EQ(c.Value("ok"), 3);
}

TEST(MetricsRegistryTest, UnlabeledCounterAndDefaultOneCountsNothing) {
  MetricsRegistry r;
  MetricCounter bytes = r.AddCounter("t_bytes_total", "Bytes.");
  bytes.Add(1024);
  bytes.Add(1);
  EXPECT_EQ(Series(r).at("t_bytes_total"), 1025);
  MetricCounter none;
  none.Add(7);  // no family: nothing happens
  EXPECT_EQ(none.Value(), 0);
}

TEST(MetricsRegistryTest, HistogramBucketsCountAndSum) {
  MetricsRegistry r;
  MetricHistogram h = r.AddHistogram("t_step_seconds", "Steps.", {0.1, 1}, "step",
                                     {"provision", "scrub"});
  h.Observe("provision", 0.05);
  h.Observe("provision", 0.5);
  h.Observe("provision", 5);
  h.Observe("scrub", 0.2);
  auto s = Series(r);
  EXPECT_EQ(s.at("t_step_seconds_bucket{step=\"provision\",le=\"0.1\"}"), 1);
  EXPECT_EQ(s.at("t_step_seconds_bucket{step=\"provision\",le=\"1\"}"), 2);
  EXPECT_EQ(s.at("t_step_seconds_bucket{step=\"provision\",le=\"+Inf\"}"), 3);
  EXPECT_EQ(s.at("t_step_seconds_count{step=\"provision\"}"), 3);
  EXPECT_DOUBLE_EQ(s.at("t_step_seconds_sum{step=\"provision\"}"), 5.55);
  EXPECT_EQ(s.at("t_step_seconds_count{step=\"scrub\"}"), 1);
  EXPECT_EQ(s.at("t_step_seconds_count{step=\"other\"}"), 0);
}

TEST(MetricsRegistryTest, GaugeFunctionIsReadAtEachScrape) {
  MetricsRegistry r;
  std::map<std::string, double> now = {{"running", 2}};
  bool fail = false;
  r.AddGaugeFunction("t_campaigns", "Campaigns.", "state", {"created", "running"},
                     [&]() -> absl::StatusOr<std::map<std::string, double>> {
                       if (fail) return absl::UnavailableError("store busy");
                       return now;
                     });
  auto s = Series(r);
  EXPECT_EQ(s.at("t_campaigns{state=\"running\"}"), 2);
  EXPECT_EQ(s.at("t_campaigns{state=\"created\"}"), 0);
  EXPECT_EQ(s.at("t_campaigns{state=\"other\"}"), 0);
  now = {{"created", 1}, {"weird", 4}};
  s = Series(r);
  EXPECT_EQ(s.at("t_campaigns{state=\"running\"}"), 0);
  EXPECT_EQ(s.at("t_campaigns{state=\"created\"}"), 1);
  EXPECT_EQ(s.at("t_campaigns{state=\"other\"}"), 4);
  // A failed read drops the family from that scrape, not the scrape.
  fail = true;
  MetricCounter c = r.AddCounter("t_c_total", "C.");
  s = Series(r);
  EXPECT_EQ(s.count("t_campaigns{state=\"created\"}"), 0u);
  EXPECT_EQ(s.count("t_c_total"), 1u);
}

}  // namespace
}  // namespace gputravel
