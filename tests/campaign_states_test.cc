// Campaign states that tell the truth, against the real daemons: a pause
// with a trip in flight reads PAUSING until that trip is safe, then PAUSED
// (and PROVISIONED events carry their totals);
// a campaign waiting for its GPU says so (and pauses at once); a pause the
// orchestrator could not finish before it stopped is finished at the next
// start; `gputravel watch` ends on PAUSED with its own exit code.
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "orchestrator/state_store.h"
#include "orchestrator/trip_steps.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/operator_cli.h"
#include "tests/stack_campaign.h"

namespace gputravel {
namespace {

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

v1::Campaign Get(v1::Orchestrator::Stub* stub, const std::string& name) {
  v1::GetCampaignRequest req;
  req.set_name(name);
  v1::Campaign out;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(30));
  grpc::Status s = stub->GetCampaign(&ctx, req, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return out;
}

// The recorded events of `name` (the stream replays them, then waits: read
// until `enough` says so or the deadline passes).
std::vector<v1::Event> Events(v1::Orchestrator::Stub* stub, const std::string& name,
                              const std::function<bool(const v1::Event&)>& enough) {
  std::vector<v1::Event> out;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  v1::WatchCampaignRequest req;
  req.set_name(name);
  auto reader = stub->WatchCampaign(&ctx, req);
  v1::Event ev;
  while (reader->Read(&ev)) {
    if (ev.seq() == 0) continue;  // live progress
    out.push_back(ev);
    if (enough(ev)) break;
  }
  ctx.TryCancel();
  (void)reader->Finish();
  return out;
}

bool IsState(const v1::Event& e, v1::CampaignState s) {
  return e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == s;
}

class CampaignStatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StackOptions o;
    o.holders = 2;
    o.rounds = 40;  // long enough to pause mid-campaign
    o.log_level = 0;
    auto stack = EmulatedStack::Start(o);
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::move(*stack);
    stub_ = stack_->OperatorClient();
  }
  void TearDown() override {
    if (stack_) stack_->Stop();
  }

  // Starts campaign `name` and returns once its first trip started.
  void StartAndWaitForATrip(const std::string& name) {
    grpc::Status created = CreateNamedCampaign(stub_.get(), stack_->CampaignSpec(), name);
    ASSERT_TRUE(created.ok()) << created.error_message();
    v1::Campaign c;
    ASSERT_TRUE(ControlCampaign(stub_.get(), "start", name, &c).ok());
    Events(stub_.get(), name, [](const v1::Event& e) { return e.kind() == v1::TRIP_STARTED; });
  }

  std::unique_ptr<EmulatedStack> stack_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

TEST_F(CampaignStatesTest, APauseReadsPausingUntilTheTripInFlightIsSafeThenPaused) {
  ASSERT_NO_FATAL_FAILURE(StartAndWaitForATrip("alpha"));
  v1::Campaign c;
  grpc::Status paused = ControlCampaign(stub_.get(), "pause", "alpha", &c);
  ASSERT_TRUE(paused.ok()) << paused.error_message();
  EXPECT_EQ(c.state(), v1::PAUSING);
  // Pausing again is a no-op.
  v1::Campaign again;
  ASSERT_TRUE(ControlCampaign(stub_.get(), "pause", "alpha", &again).ok());
  EXPECT_TRUE(again.state() == v1::PAUSING || again.state() == v1::PAUSED);
  std::vector<v1::Event> ev = Events(stub_.get(), "alpha", [](const v1::Event& e) {
    return IsState(e, v1::PAUSED);
  });
  ASSERT_FALSE(ev.empty());
  ASSERT_TRUE(IsState(ev.back(), v1::PAUSED)) << "never PAUSED";
  size_t pausing = ev.size();
  for (size_t i = 0; i < ev.size(); ++i) {
    if (IsState(ev[i], v1::PAUSING)) pausing = i;
  }
  ASSERT_LT(pausing, ev.size()) << "no PAUSING event";
  // Every trip started is finished before PAUSED; none starts after PAUSING.
  int open_trips = 0;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind() == v1::TRIP_STARTED) {
      EXPECT_LT(i, pausing) << "trip " << ev[i].trip() << " started after PAUSING";
      ++open_trips;
    }
    if (ev[i].kind() == v1::TRIP_FINISHED) --open_trips;
    if (ev[i].kind() == v1::PROVISIONED) {  // carries its window's total
      EXPECT_GT(ev[i].total_bytes(), 0u) << "trip " << ev[i].trip();
      EXPECT_EQ(ev[i].bytes(), ev[i].total_bytes()) << "trip " << ev[i].trip();
    }
  }
  EXPECT_EQ(open_trips, 0);
  // The GPU is free once PAUSED, and the campaign resumes.
  v1::ListCampaignGpusResponse gpus;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ListGpus(&ctx, {}, &gpus).ok());
  ASSERT_EQ(gpus.gpus_size(), 1);
  EXPECT_EQ(gpus.gpus(0).campaign(), "");
  EXPECT_EQ(Get(stub_.get(), "alpha").state(), v1::PAUSED);
  ASSERT_TRUE(ControlCampaign(stub_.get(), "resume", "alpha", &c).ok());
  EXPECT_EQ(c.state(), v1::RUNNING);
  ASSERT_TRUE(ControlCampaign(stub_.get(), "cancel", "alpha", &c).ok());
}

TEST_F(CampaignStatesTest, ACampaignWaitingForItsGpuSaysSoAndPausesAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartAndWaitForATrip("first"));
  ASSERT_TRUE(CreateNamedCampaign(stub_.get(), stack_->CampaignSpec(), "second").ok());
  v1::Campaign c;
  ASSERT_TRUE(ControlCampaign(stub_.get(), "start", "second", &c).ok());
  v1::Campaign second = Get(stub_.get(), "second");
  EXPECT_EQ(second.state(), v1::RUNNING);
  EXPECT_TRUE(second.waiting_for_gpu());
  EXPECT_EQ(second.gpu_holder(), "first");
  EXPECT_FALSE(Get(stub_.get(), "first").waiting_for_gpu());
  ASSERT_TRUE(ControlCampaign(stub_.get(), "pause", "second", &c).ok());
  EXPECT_EQ(c.state(), v1::PAUSED);  // nothing of it was in flight
  EXPECT_FALSE(c.waiting_for_gpu());
  ASSERT_TRUE(ControlCampaign(stub_.get(), "cancel", "first", &c).ok());
  ASSERT_TRUE(ControlCampaign(stub_.get(), "cancel", "second", &c).ok());
  // Its holders say the campaign was cancelled, not that they are active.
  const v1::Campaign cancelled = Get(stub_.get(), "second");
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  ASSERT_EQ(cancelled.holders_size(), 2);
  for (const auto& h : cancelled.holders()) EXPECT_EQ(h.state(), "cancelled") << h.name();
}

TEST_F(CampaignStatesTest, APauseTheOrchestratorCouldNotFinishIsFinishedAtItsNextStart) {
  ASSERT_TRUE(CreateNamedCampaign(stub_.get(), stack_->CampaignSpec(), "gamma").ok());
  stub_.reset();
  ASSERT_GE(stack_->process("orchestrator")->Terminate(), 0);
  {
    // As an orchestrator leaves it that stops mid-pause.
    auto store = StateStore::Open(stack_->dir() + "/state/orchestrator.db",
                                  stack_->dir() + "/state/checkpoint.key");
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->SetCampaignState("gamma", kCampaignRunning, "", "started").ok());
    ASSERT_TRUE((*store)->SetCampaignState("gamma", kCampaignPausing, "", "pausing").ok());
  }
  ASSERT_TRUE(stack_->Restart("orchestrator").ok());
  stub_ = stack_->OperatorClient();
  std::vector<v1::Event> ev = Events(stub_.get(), "gamma", [](const v1::Event& e) {
    return IsState(e, v1::PAUSED);
  });
  ASSERT_FALSE(ev.empty());
  EXPECT_TRUE(IsState(ev.back(), v1::PAUSED));
  EXPECT_EQ(Get(stub_.get(), "gamma").state(), v1::PAUSED);
}

// `gputravel watch` against the real orchestrator: ends on PAUSED with exit
// 8, not on a replayed PAUSED of a campaign since resumed; --until RUNNING
// ends at once with 0 for a running one.
TEST_F(CampaignStatesTest, WatchEndsOnPausedWithItsOwnExitCodeAndUntilAState) {
  auto watch = [&](const std::vector<std::string>& extra, std::string* out) {
    std::vector<std::string> args = {"watch", "delta", "--no_progress"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunOperatorCli(*stack_, args, 120, out);
  };
  ASSERT_NO_FATAL_FAILURE(StartAndWaitForATrip("delta"));
  v1::Campaign c;
  ASSERT_TRUE(ControlCampaign(stub_.get(), "pause", "delta", &c).ok());
  std::string out;
  EXPECT_EQ(watch({}, &out), 8) << out;
  EXPECT_NE(out.find("PAUSED"), std::string::npos) << out;
  EXPECT_NE(out.find("gputravel resume delta"), std::string::npos) << out;
  ASSERT_TRUE(ControlCampaign(stub_.get(), "resume", "delta", &c).ok());
  // The replayed PAUSED is history now: --until RUNNING ends at the current state.
  EXPECT_EQ(watch({"--until=RUNNING"}, &out), 0) << out;
  EXPECT_EQ(watch({"--until=SLEEPING"}, &out), 2) << out;
  EXPECT_NE(out.find("--until must be a campaign state"), std::string::npos) << out;
  ASSERT_TRUE(ControlCampaign(stub_.get(), "cancel", "delta", &c).ok());
  EXPECT_EQ(watch({"--until=PAUSED"}, &out), 7) << out;  // CANCELLED first
}

}  // namespace
}  // namespace gputravel
