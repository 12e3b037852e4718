#include "orchestrator/orchestrator_metrics.h"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "metrics/metrics_registry.h"
#include "metrics/metrics_scrape.h"
#include "orchestrator/state_store.h"
#include "proto/training.pb.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

constexpr char kCampaign[] = "oncology-consortium";
constexpr char kHolder[] = "hospital-a";

class OrchestratorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("orchestrator_metrics.");
    auto store = StateStore::Open(dir_ + "/state.db", dir_ + "/checkpoint.key");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    metrics_ = std::make_unique<OrchestratorMetrics>(&registry_, store_.get());
  }
  void TearDown() override {
    metrics_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Create(const std::string& name) {
    CampaignRow c;
    c.name = name;
    c.request_id = "r-" + name;
    c.spec_json = "{}";
    c.gpu = "gpu0";
    v1::TrainingTerms terms;
    terms.set_min_windows_per_loss(1);
    c.terms = terms.SerializeAsString();
    HolderRow h;
    h.name = kHolder;
    h.dataset_bytes = 1000;
    ASSERT_TRUE(store_->CreateCampaign(c, {h}).ok());
  }

  uint64_t Begin(uint64_t offset) {
    auto id = store_->NextTripId();
    EXPECT_TRUE(id.ok());
    TripRow t;
    t.id = *id;
    t.campaign = kCampaign;
    t.holder = kHolder;
    t.window_offset = offset;
    t.window_length = 100;
    auto begun = store_->BeginTrip(t);
    EXPECT_TRUE(begun.ok()) << begun.status();
    return *id;
  }

  void Step(uint64_t id, const char* step) {
    auto s = step == std::string(kStepRouteOut)
                 ? store_->SetTripStep(id, step, "", TripCounterWindow{1, 1, 1})
                 : store_->SetTripStep(id, step, "");
    ASSERT_TRUE(s.ok()) << s.status();
  }

  // A free-form event of trip `id` (as the engine and recovery append them).
  void Append(uint64_t id, const char* kind, const char* step) {
    EventRow e;
    e.campaign = kCampaign;
    e.trip = id;
    e.kind = kind;
    e.step = step;
    ASSERT_TRUE(store_->AppendEvent(e).ok());
  }

  void Finish(uint64_t id, const char* outcome, const std::string& error = "") {
    TripFinish f;
    f.outcome = outcome;
    f.error = error;
    const bool ok = f.outcome == kOutcomeOk;
    f.scrub_verified = ok;
    f.rekeyed = ok;
    f.advance_cursor = ok;
    auto s = store_->FinishTrip(id, f);
    ASSERT_TRUE(s.ok()) << s.status();
  }

  std::map<std::string, double> Scrape() {
    auto s = ParseMetricsText(registry_.Text());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : std::map<std::string, double>{};
  }

  std::string dir_;
  MetricsRegistry registry_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<OrchestratorMetrics> metrics_;
};

TEST_F(OrchestratorMetricsTest, CountsTripsStepsBytesRekeysScrubsAndRecoveriesFromCommits) {
  Create(kCampaign);
  Create("waiting");
  ASSERT_TRUE(store_->SetCampaignState(kCampaign, kCampaignRunning, "", "start").ok());

  // An ok trip through every step but training.
  const uint64_t ok = Begin(0);
  Step(ok, kStepRouteOut);
  Step(ok, kStepProvision);
  ASSERT_TRUE(store_->RecordProvisioned(ok, 100, 1, 0.1, true).ok());
  Step(ok, kStepRouteBack);
  Step(ok, kStepRekey);
  Step(ok, kStepScrub);
  Append(ok, "scrubbed", kStepScrub);
  Finish(ok, kOutcomeOk);

  // A trip that failed before the GPU left (its holder's evidence, say).
  Finish(Begin(100), kOutcomeFailed, "holder hospital-a: evidence does not meet the policy");

  // One interrupted while away, made safe by recovery.
  const uint64_t interrupted = Begin(100);
  Step(interrupted, kStepRouteOut);
  Append(interrupted, "recovery", kStepRouteOut);
  Finish(interrupted, kOutcomeAborted, "interrupted at step route_out");

  auto s = Scrape();
  EXPECT_EQ(s.at("gputravel_orchestrator_trips_total{outcome=\"ok\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_trips_total{outcome=\"failed\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_trips_total{outcome=\"aborted\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_trips_total{outcome=\"other\"}"), 0);
  EXPECT_EQ(s.at("gputravel_orchestrator_provisioned_bytes_total"), 100);
  EXPECT_EQ(s.at("gputravel_orchestrator_rekeys_total"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_scrubs_total"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_recoveries_total{step=\"route_out\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_recoveries_total{step=\"planned\"}"), 0);
  // Each step a trip left is one observation of its duration.
  const std::map<std::string, double> steps = {{"planned", 3},   {"route_out", 2},
                                               {"provision", 1}, {"route_back", 1},
                                               {"rekey", 1},     {"train", 0},
                                               {"scrub", 1}};
  for (const auto& [step, count] : steps) {
    EXPECT_EQ(s.at("gputravel_orchestrator_trip_step_seconds_count{step=\"" + step + "\"}"),
              count)
        << step;
  }
  EXPECT_EQ(s.at("gputravel_orchestrator_trip_seconds_count"), 3);
  EXPECT_EQ(s.at("gputravel_orchestrator_campaigns{state=\"running\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_campaigns{state=\"created\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_campaigns{state=\"completed\"}"), 0);

  // Nothing that names a campaign, a holder or an error.
  const std::string text = registry_.Text();
  for (const char* name : {kCampaign, kHolder, "waiting", "evidence"}) {
    EXPECT_EQ(text.find(name), std::string::npos) << name;
  }
}

TEST_F(OrchestratorMetricsTest, CampaignStatesFollowTheStoreAtEachScrape) {
  Create(kCampaign);
  EXPECT_EQ(Scrape().at("gputravel_orchestrator_campaigns{state=\"created\"}"), 1);
  ASSERT_TRUE(store_->SetCampaignState(kCampaign, kCampaignCancelled, "", "cancel").ok());
  auto s = Scrape();
  EXPECT_EQ(s.at("gputravel_orchestrator_campaigns{state=\"created\"}"), 0);
  EXPECT_EQ(s.at("gputravel_orchestrator_campaigns{state=\"cancelled\"}"), 1);
  ASSERT_TRUE(store_->DeleteCampaign(kCampaign, "operator").ok());
  EXPECT_EQ(Scrape().at("gputravel_orchestrator_campaigns{state=\"cancelled\"}"), 0);
}

// A trip this process did not see start (it began before a restart) is
// counted when it ends, and its step is timed from the first commit seen.
TEST_F(OrchestratorMetricsTest, ATripSeenMidwayIsCountedNotTimedWhole) {
  Create(kCampaign);
  ASSERT_TRUE(store_->SetCampaignState(kCampaign, kCampaignRunning, "", "start").ok());
  // The trip begins before this process (its registry and metrics) does.
  metrics_.reset();
  const uint64_t id = Begin(0);
  MetricsRegistry registry;
  metrics_ = std::make_unique<OrchestratorMetrics>(&registry, store_.get());
  Step(id, kStepRouteOut);
  Finish(id, kOutcomeAborted);
  auto parsed = ParseMetricsText(registry.Text());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::map<std::string, double>& s = *parsed;
  metrics_.reset();  // before its registry goes
  EXPECT_EQ(s.at("gputravel_orchestrator_trips_total{outcome=\"aborted\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_trip_step_seconds_count{step=\"route_out\"}"), 1);
  EXPECT_EQ(s.at("gputravel_orchestrator_trip_step_seconds_count{step=\"planned\"}"), 0);
  EXPECT_EQ(s.at("gputravel_orchestrator_trip_seconds_count"), 0);
}

}  // namespace
}  // namespace gputravel
