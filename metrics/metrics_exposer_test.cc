#include "metrics/metrics_exposer.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "metrics/metrics_registry.h"
#include "metrics/metrics_scrape.h"

namespace gputravel {
namespace {

TEST(CheckMetricsListenTest, OnlyTheIpv4LoopbackWithAPort) {
  for (const char* ok : {"127.0.0.1:0", "127.0.0.1:9100", "127.0.0.1:65535"}) {
    EXPECT_TRUE(CheckMetricsListen(ok, "cfg: metrics_listen").ok()) << ok;
  }
  for (const char* bad :
       {"0.0.0.0:9100", ":9100", "9100", "localhost:9100", "10.1.2.3:9100", "[::1]:9100",
        "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:9100,0.0.0.0:1",
        "127.0.0.1:9100s", "unix:/tmp/m.sock", "127.0.0.10:9100", ""}) {
    absl::Status s = CheckMetricsListen(bad, "cfg: metrics_listen");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("cfg: metrics_listen"), std::string::npos) << s;
    EXPECT_NE(s.message().find("127.0.0.1:PORT"), std::string::npos) << s;
  }
}

TEST(MetricsExposerTest, ServesTheRegistryOverHttpOnTheLoopback) {
  MetricsRegistry r;
  MetricCounter routes = r.AddCounter("t_routes_total", "Routes.", "outcome", {"ok"});
  double campaigns = 1;
  r.AddGaugeFunction("t_campaigns", "Campaigns.", "state", {"running"},
                     [&]() -> absl::StatusOr<std::map<std::string, double>> {
                       return std::map<std::string, double>{{"running", campaigns}};
                     });
  auto exposer = MetricsExposer::Start("127.0.0.1:0", r, "test");
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const std::string address = (*exposer)->address();
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  EXPECT_NE(address, "127.0.0.1:0");  // the port the kernel chose

  routes.Add("ok", 2);
  auto body = ScrapeMetrics(address);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_NE(body->find("# TYPE t_routes_total counter"), std::string::npos) << *body;
  auto s = ParseMetricsText(*body);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->at("t_routes_total{outcome=\"ok\"}"), 2);
  EXPECT_EQ(s->at("t_campaigns{state=\"running\"}"), 1);

  // Every scrape reads the current values.
  routes.Add("ok");
  campaigns = 3;
  s = ParseMetricsText(*ScrapeMetrics(address));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->at("t_routes_total{outcome=\"ok\"}"), 3);
  EXPECT_EQ(s->at("t_campaigns{state=\"running\"}"), 3);
}

TEST(MetricsExposerTest, APortInUseIsAnErrorNotAnException) {
  MetricsRegistry r;
  auto first = MetricsExposer::Start("127.0.0.1:0", r, "first");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsExposer::Start((*first)->address(), r, "orch.json: metrics_listen");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("orch.json: metrics_listen"), std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find((*first)->address()), std::string::npos)
      << second.status();
}

TEST(MetricsExposerTest, RefusesANonLoopbackAddressBeforeBinding) {
  MetricsRegistry r;
  auto e = MetricsExposer::Start("0.0.0.0:0", r, "mux.json: metrics_listen");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gputravel
