// The daemons' metrics endpoints, scraped as Prometheus would (an HTTP GET
// on the loopback) while the real daemons run a campaign: what each shows
// agrees with what the orchestrator's API says of the campaign, and names
// no campaign, holder or dataset.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "metrics/metrics_scrape.h"
#include "proto/mux.grpc.pb.h"
#include "proto/orchestrator.pb.h"

namespace gputravel {
namespace {

using Series = std::map<std::string, double>;

Series Scrape(EmulatedStack& stack, const std::string& daemon) {
  auto address = stack.metrics_address(daemon);
  EXPECT_TRUE(address.ok()) << address.status();
  if (!address.ok()) return {};
  EXPECT_EQ(address->rfind("127.0.0.1:", 0), 0u) << *address;
  auto body = ScrapeMetrics(*address);
  EXPECT_TRUE(body.ok()) << daemon << ": " << body.status();
  if (!body.ok()) return {};
  for (const std::string& name : {std::string("metrics-campaign"), std::string("holder-a"),
                                  std::string("holder-b"), std::string("gpu0")}) {
    EXPECT_EQ(body->find(name), std::string::npos) << daemon << " shows " << name;
  }
  auto parsed = ParseMetricsText(*body);
  EXPECT_TRUE(parsed.ok()) << daemon << ": " << parsed.status();
  return parsed.ok() ? *parsed : Series{};
}

double At(const Series& s, const std::string& series) {
  auto it = s.find(series);
  EXPECT_NE(it, s.end()) << "no series " << series;
  return it == s.end() ? -1 : it->second;
}

TEST(MetricsTest, ScrapesAgreeWithTheApiAfterACampaign) {
  StackOptions o;
  o.holders = 2;
  o.dataset_bytes = {256u << 10, 384u << 10};
  o.buffer_bytes = 128u << 10;  // several trips per holder
  o.chunk_bytes = 64u << 10;
  o.holder_training_policy["min_window_bytes"] = 4096;
  o.trainer = false;
  o.eval_set = false;
  o.campaign = "metrics-campaign";
  o.metrics = true;
  auto started = EmulatedStack::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  EmulatedStack& stack = **started;

  // Before any campaign: every family is there, at zero.
  Series orch = Scrape(stack, "orchestrator");
  EXPECT_EQ(At(orch, "gputravel_orchestrator_trips_total{outcome=\"ok\"}"), 0);
  EXPECT_EQ(At(orch, "gputravel_orchestrator_campaigns{state=\"running\"}"), 0);

  auto campaign = stack.RunCampaign();
  ASSERT_TRUE(campaign.ok()) << campaign.status();
  ASSERT_EQ(campaign->state(), v1::COMPLETED) << campaign->error();
  const double trips_ok = static_cast<double>(campaign->trips_ok());
  ASSERT_GE(trips_ok, 5);  // 2 + 3 windows
  std::map<std::string, double> ok_by_holder, bytes_by_holder;
  for (const v1::Trip& t : campaign->trips()) {
    if (t.outcome() != "ok") continue;
    ok_by_holder[t.holder()] += 1;
    bytes_by_holder[t.holder()] += static_cast<double>(t.bytes());
  }

  orch = Scrape(stack, "orchestrator");
  EXPECT_EQ(At(orch, "gputravel_orchestrator_trips_total{outcome=\"ok\"}"), trips_ok);
  EXPECT_EQ(At(orch, "gputravel_orchestrator_trips_total{outcome=\"failed\"}"),
            campaign->trips_failed());
  EXPECT_EQ(At(orch, "gputravel_orchestrator_provisioned_bytes_total"),
            campaign->bytes_provisioned());
  EXPECT_EQ(At(orch, "gputravel_orchestrator_rekeys_total"), trips_ok);
  EXPECT_EQ(At(orch, "gputravel_orchestrator_scrubs_total"), trips_ok);
  EXPECT_EQ(At(orch, "gputravel_orchestrator_recoveries_total{step=\"provision\"}"), 0);
  EXPECT_EQ(At(orch, "gputravel_attestation_failures_total"), 0);
  EXPECT_EQ(At(orch, "gputravel_orchestrator_campaigns{state=\"completed\"}"), 1);
  EXPECT_EQ(At(orch, "gputravel_orchestrator_campaigns{state=\"running\"}"), 0);
  for (const char* step : {"planned", "route_out", "provision", "route_back", "rekey",
                           "scrub"}) {
    EXPECT_EQ(At(orch, std::string("gputravel_orchestrator_trip_step_seconds_count{step=\"") +
                           step + "\"}"),
              trips_ok)
        << step;
  }
  EXPECT_EQ(At(orch, "gputravel_orchestrator_trip_step_seconds_count{step=\"train\"}"), 0);
  EXPECT_EQ(At(orch, "gputravel_orchestrator_trip_seconds_count"), trips_ok);
  EXPECT_GT(At(orch, "gputravel_orchestrator_trip_seconds_sum"), 0);

  // Each holder counts its own provisions (it answers just before the
  // orchestrator moves on: a few tries at most).
  for (const std::string& holder : stack.holder_names()) {
    Series h;
    for (int i = 0; i < 50; ++i) {
      h = Scrape(stack, holder);
      if (h["gputravel_holder_provisions_total{outcome=\"ok\"}"] >= ok_by_holder[holder]) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(At(h, "gputravel_holder_provisions_total{outcome=\"ok\"}"), ok_by_holder[holder])
        << holder;
    EXPECT_EQ(At(h, "gputravel_holder_provisions_total{outcome=\"refused\"}"), 0) << holder;
    EXPECT_EQ(At(h, "gputravel_holder_provisioned_bytes_total"), bytes_by_holder[holder])
        << holder;
    EXPECT_EQ(At(h, "gputravel_attestation_failures_total"), 0) << holder;
  }

  // The MUX: out and back for every trip, at least; then a stale token
  // from the orchestrator's own certificate is refused and counted.
  Series mux = Scrape(stack, "mux");
  EXPECT_GE(At(mux, "gputravel_mux_routes_total{outcome=\"ok\"}"), 2 * trips_ok);
  EXPECT_EQ(At(mux, "gputravel_mux_fencing_refusals_total{action=\"route\"}"), 0);
  auto channel = MakeSecureChannel(stack.mux_endpoint(),
                                   stack.tls({kRoleOrchestrator, "orchestrator"}),
                                   Identity{kRoleMux, "mux"});
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto mux_stub = v1::Mux::NewStub(*channel);
  v1::RouteRequest stale;
  stale.set_gpu("gpu0");
  stale.set_domain(EmulatedStack::kOrchestratorDomain);
  stale.set_fencing_token(1);
  v1::RouteResponse ignored;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status refused = mux_stub->Route(&ctx, stale, &ignored);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << refused.error_message();
  mux = Scrape(stack, "mux");
  EXPECT_EQ(At(mux, "gputravel_mux_fencing_refusals_total{action=\"route\"}"), 1);
  EXPECT_EQ(At(mux, "gputravel_mux_routes_total{outcome=\"refused\"}"), 1);
  EXPECT_GE(At(mux, "gputravel_mux_route_seconds_count{outcome=\"ok\"}"), 2 * trips_ok);
}

}  // namespace
}  // namespace gputravel
