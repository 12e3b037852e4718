#include "metrics/daemon_metrics.h"

#include <string>

#include "gtest/gtest.h"
#include "keyxfer/dev_attester.h"
#include "metrics/metrics_scrape.h"

namespace gputravel {
namespace {

TEST(DaemonMetricsTest, ServesItsRegistryAndCountsRefusalsOfTheVerifierItWraps) {
  DevVerifier inner(std::string("not a certificate"), DevPolicy{});
  auto m = DaemonMetrics::Start("127.0.0.1:0", "cfg: metrics_listen", &inner);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_NE((*m)->verifier(), nullptr);
  (*m)->registry()->AddCounter("t_routes_total", "Routes.").Add(4);
  Evidence junk;
  junk.set_format("no such format");
  EXPECT_FALSE((*m)->verifier()->Verify(junk, ReportData{}).ok());

  auto body = ScrapeMetrics((*m)->address());
  ASSERT_TRUE(body.ok()) << body.status();
  auto s = ParseMetricsText(*body);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->at("t_routes_total"), 4);
  EXPECT_EQ(s->at(kAttestationFailuresMetric), 1);
}

TEST(DaemonMetricsTest, WithoutAVerifierAndOnABadAddress) {
  auto m = DaemonMetrics::Start("127.0.0.1:0", "cfg: metrics_listen", nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->verifier(), nullptr);
  auto bad = DaemonMetrics::Start("0.0.0.0:9100", "cfg: metrics_listen", nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gputravel
