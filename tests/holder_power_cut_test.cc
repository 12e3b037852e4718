// Power cut of a holder agent under a live campaign (P7, and P5's
// freshness): holder-a's agent runs under tests/power_cut_preload.so with
// its state directory (the trip freshness record, its temporary and its
// lock) and its bounce rings tracked, as its configuration names them. The
// agent records each trip it accepts before it uses the trip's keys (synced
// file, then synced directory: holder_agent/trip_freshness.h). A first run
// cuts its power just after its second acceptance became durable, before it
// used a key of that trip (GPUTRAVEL_FAILPOINT=after_accept#2), and counts
// the syncs it asked for during its trips; each later run cuts its power at
// one of those syncs (every write it did not sync is lost:
// tests/power_cut_image.h). The orchestrator notices the dead agent and
// pauses the campaign (a dead agent is no evidence against its holder); the
// agent starts again on what its disk kept and, before the campaign goes
// on, must refuse a replay of every hand-off it had accepted and
// acknowledged (its report reached the orchestrator) before the cut, and of
// the one it accepted in the first run without acknowledging it. Then the
// operator resumes, and the campaign must complete with every invariant of
// tests/crash_fixture.h (the keeper's kept keys included); at the end the
// agent refuses a replay of every trip it was handed.
#include <stdio.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/power_cut_daemon.h"
#include "tests/power_cut_image.h"
#include "tests/replayed_handoff.h"
#include "tests/stack_campaign.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace gputravel {
namespace {

constexpr char kHolder[] = "holder-a";
// Cut runs at most (each one is a campaign).
constexpr size_t kMostCuts = 8;

// One campaign whose holder-a agent runs under the power cut.
struct HolderRun {
  CrashFixture f;
  power_cut::Config config;
};

// Starts the fixture (trips holder-a, holder-b, keeper, holder-a: the cut
// agent has a trip before the keeper's and one after), stops holder-a's
// agent cleanly and starts it again under the preload with the power cut at
// sync `cut_at` (0: never) and GPUTRAVEL_FAILPOINT=`failpoint`; then starts
// the campaign.
absl::Status StartHolderUnderPowerCut(HolderRun* r, const std::string& name, long cut_at,
                                      const std::string& failpoint = "") {
  absl::Status s = StartCrashFixture(&r->f, {}, {3u << 20, 1u << 20});
  if (!s.ok()) return s;
  auto agent = ReadJsonFile(r->f.stack->deployment().config_path(kHolder));
  if (!agent.ok()) return agent.status();
  const std::string state_dir = agent->value("state_dir", "");
  const std::string bounce_dir = agent->value("bounce_dir", "");
  if (state_dir.empty() || bounce_dir.empty()) {
    return absl::InternalError(std::string("the configuration of ") + kHolder +
                               " names no state_dir or bounce_dir");
  }
  // Its rings live in its TD's shared memory and are never synced: the
  // model drops every ring it made, as the cut would.
  s = RestartUnderPowerCut(
      &r->f, kHolder, std::string(kHolder) + "-" + name,
      {state_dir + "/", bounce_dir + "/gputravel-bounce-" + std::string(kHolder) + "-"}, cut_at,
      failpoint, &r->config);
  if (!s.ok()) return s;
  return CreateAndStartCampaign(r->f.stack.get(), "holder-power-cut");
}

// A hand-off of the same campaign to take its buffer, chunk size, terms and
// lanes from: the first one the keeper was handed.
v1::HandoffBinding CampaignHandoff(HolderRun* r) {
  auto kept = r->f.keeper->kept();
  return kept.empty() ? v1::HandoffBinding() : kept.front().binding;
}

// Replays `trip` of holder-a to its agent: refused as not fresh.
void ExpectReplayRefused(HolderRun* r, const v1::Trip& trip, const std::string& when) {
  const v1::HandoffBinding like = CampaignHandoff(r);
  ASSERT_GT(like.lanes_size(), 0) << "the keeper was handed nothing to model a replay on";
  auto binding = ReplayedBinding(trip, like);
  ASSERT_TRUE(binding.ok()) << binding.status();
  grpc::Status s = ReplayHandoff(r->f.stack.get(), *binding);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << when << ": a replay of trip " << trip.id() << " was answered " << s.error_code() << ": "
      << s.error_message();
  const std::string fresh =
      "hand-off for trip " + std::to_string(trip.id()) + " of campaign 'demo' is not fresh";
  EXPECT_NE(s.error_message().find(fresh), std::string::npos)
      << when << ": trip " << trip.id() << ": " << s.error_message();
}

// The trips of holder-a in `c` that ended ok: their hand-offs were accepted
// and their reports reached the orchestrator.
std::vector<v1::Trip> AcknowledgedTrips(const v1::Campaign& c) {
  std::vector<v1::Trip> out;
  for (const auto& t : c.trips()) {
    if (t.holder() == kHolder && t.outcome() == "ok") out.push_back(t);
  }
  return out;
}

// The final campaign: the cut trip, and only it, ended otherwise than ok,
// every invariant holds, and the agent refuses a replay of every trip of
// holder-a.
void CheckCampaign(HolderRun* r, const v1::Campaign& c) {
  int aborted = 0, failed = 0;
  for (const auto& t : c.trips()) {
    if (t.outcome() == "ok") continue;
    (t.outcome() == "aborted" ? aborted : failed) += 1;
    EXPECT_EQ(t.holder(), kHolder) << "trip " << t.id() << " of " << t.holder() << " "
                                   << t.outcome() << ": only holder-a lost power";
  }
  EXPECT_EQ(aborted + failed, 1) << "the trip whose agent died";
  CrashExpectation expected;
  expected.aborted = aborted;
  expected.failed = failed;
  CheckCrashInvariants(r->f.stack.get(), r->f.keeper.get(), c, expected);
  for (const auto& t : c.trips()) {
    if (t.holder() == kHolder) ExpectReplayRefused(r, t, "at the campaign's end");
  }
}

// After the power cut of `r` (called `what`): the campaign pauses, the
// agent starts again on what its disk kept and refuses a replay of every
// trip of holder-a that ended ok and of `also` (trips it accepted), the
// operator resumes, and the campaign completes (CheckCampaign).
void RestartResumeAndCheck(HolderRun* r, const std::string& what,
                           const std::vector<uint64_t>& also = {}) {
  RestoreAfterCut(&r->f, kHolder, r->config);
  if (::testing::Test::HasFatalFailure()) return;
  // The orchestrator noticed the dead agent: the campaign paused, no holder
  // charged for it.
  v1::Campaign paused;
  ASSERT_TRUE(WaitForCampaign(
      r->f.stack.get(), "demo", 60, [](const v1::Campaign& c) { return c.state() == v1::PAUSED; },
      &paused))
      << "not paused: " << v1::CampaignState_Name(paused.state()) << " " << paused.error();
  for (const auto& h : paused.holders()) {
    EXPECT_NE(h.state(), "failed") << h.name() << " charged for holder-a's power cut";
  }
  absl::Status s = r->f.stack->Restart(kHolder);
  ASSERT_TRUE(s.ok()) << "holder-a's agent did not start on what its disk kept: " << s;
  // Before the orchestrator hands it anything new: every acceptance it
  // acknowledged (and those in `also`) survived the cut.
  paused = GetStackCampaign(r->f.stack.get(), "demo", /*include_trips=*/true);
  std::vector<v1::Trip> replayed = AcknowledgedTrips(paused);
  for (const auto& t : paused.trips()) {
    if (std::find(also.begin(), also.end(), t.id()) != also.end()) replayed.push_back(t);
  }
  ASSERT_EQ(replayed.size() - AcknowledgedTrips(paused).size(), also.size())
      << "a trip to replay is not in the campaign";
  std::string ids;
  for (const auto& t : replayed) {
    ExpectReplayRefused(r, t, "after the restart");
    ids += " " + std::to_string(t.id());
  }
  ASSERT_TRUE(ResumeCampaign(r->f.stack.get(), "demo")) << "the campaign could not be resumed";
  auto c = r->f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckCampaign(r, *c);
  std::printf(
      "holder-a cut %s: paused (%s); after the restart, replayed trips:%s; "
      "completed with %d trips\n",
      what.c_str(), paused.error().substr(0, 80).c_str(),
      ids.empty() ? " none (none acknowledged yet)" : ids.c_str(), c->trips_size());
}

TEST(HolderPowerCutTest, AfterAnAcceptanceAndAtEverySyncTheRestartedAgentRefusesReplays) {
  // First the power is cut just after the agent's second acceptance (its
  // trip after the keeper's) became durable, before it used a key of the
  // trip: the orchestrator never got its report, yet the restarted agent
  // refuses that hand-off, like the first. No sync was cut: the preload
  // logged every sync of both acceptances, which the runs below cut.
  std::vector<SyncPoint> points;
  {
    HolderRun r;
    absl::Status s = StartHolderUnderPowerCut(&r, "after-accept", 0, "after_accept#2");
    ASSERT_TRUE(s.ok()) << s;
    Subprocess* agent = r.f.stack->process(kHolder);
    ASSERT_NE(agent, nullptr);
    ASSERT_TRUE(WaitForExit(agent, 90)) << "holder-a never reached its second acceptance";
    v1::Campaign now = GetStackCampaign(r.f.stack.get(), "demo", /*include_trips=*/true);
    uint64_t second = 0;
    int of_holder = 0;
    for (const auto& t : now.trips()) {
      if (t.holder() == kHolder && ++of_holder == 2) second = t.id();
    }
    ASSERT_NE(second, 0u) << "no second trip of holder-a";
    RestartResumeAndCheck(
        &r, "after its acceptance of trip " + std::to_string(second) + " was durable", {second});
    if (HasFatalFailure()) return;
    points = HolderTripSyncs(r.f, r.config, kHolder, kHolder);
    StopCrashFixture(&r.f);
  }
  // Each acceptance: the record's file, then its directory.
  ASSERT_EQ(points.size(), 4u);
  const std::vector<SyncPoint> chosen = ChooseSyncPoints(points, kMostCuts);
  for (const SyncPoint& p : chosen) {
    SCOPED_TRACE("holder-a power cut at sync " + p.Describe());
    HolderRun r;
    absl::Status s = StartHolderUnderPowerCut(&r, "sync-" + std::to_string(p.n), p.n);
    ASSERT_TRUE(s.ok()) << s;
    RestartResumeAndCheck(&r, "at sync " + p.Describe());
    ExpectCutAt(r.f, r.config, p);
    StopCrashFixture(&r.f);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace gputravel
