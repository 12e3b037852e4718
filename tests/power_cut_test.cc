// Power cut (P7): the orchestrator loses power during a trip: it dies, and
// every write it made to its state (SQLite database, WAL, shared-memory
// index, directory entries, checkpoint key) without a sync since is lost
// (tests/power_cut_image.h says exactly what the model drops;
// tests/power_cut_preload.cc cuts the power). Restarted on what the disk
// kept, the orchestrator must still complete the campaign, count every trip
// exactly once, leave no key the keeper kept working, and scrub every buffer
// before the next holder (tests/crash_fixture.h).
//
// The cut points: every sync the orchestrator asks for during the keeper's
// trip (a first run counts them; each then cuts one run, just before that
// sync is done, when everything the trip did before it has happened but
// the commit being synced and every unsynced one before it are lost), and
// every trip step that recovery has a rule for (killed right after the
// step's commit, before its side effect, as tests/crash_recovery_test.cc
// does, but with the unsynced commits dropped too).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "orchestrator/trip_steps.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/power_cut_daemon.h"
#include "tests/power_cut_image.h"
#include "tests/stack_campaign.h"

namespace gputravel {
namespace {

constexpr char kOrchestrator[] = "orchestrator";

// A stack whose orchestrator runs under the power cut: started as usual,
// stopped (cleanly) before any campaign, and started again with the preload
// library, so its state is durable when the model starts.
struct PowerCutRun {
  CrashFixture f;
  power_cut::Config config;
};

absl::Status StartOrchestratorUnderPowerCut(PowerCutRun* r, const std::string& name,
                                            long cut_at, const std::string& failpoint = "") {
  // Trips a, b, keeper, a: the keeper's trip is interrupted, one follows.
  absl::Status s = StartCrashFixture(&r->f, {}, {3u << 20, 2u << 20});
  if (!s.ok()) return s;
  const std::string state = r->f.stack->dir() + "/state/";
  s = RestartUnderPowerCut(&r->f, kOrchestrator, name,
                           {state + "orchestrator.", state + "checkpoint.key"}, cut_at, failpoint,
                           &r->config);
  if (!s.ok()) return s;
  return CreateAndStartCampaign(r->f.stack.get(), "power-cut");
}

// Waits for the orchestrator to die (the cut or the failpoint), puts back
// what the disk kept, restarts it without the preload, and checks every
// invariant on the final campaign. `*recovered_at`: the step at which
// recovery found the keeper's interrupted trip, if it aborted it.
void RestoreRestartAndCheck(PowerCutRun* r, std::string* recovered_at) {
  RestoreAfterCut(&r->f, kOrchestrator, r->config);
  if (::testing::Test::HasFatalFailure()) return;
  absl::Status s = r->f.stack->Restart(kOrchestrator);
  ASSERT_TRUE(s.ok()) << s;
  auto c = r->f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  int aborted = 0;
  recovered_at->clear();
  for (const auto& t : c->trips()) {
    if (t.outcome() != "aborted") continue;
    ++aborted;
    EXPECT_EQ(t.holder(), "keeper") << "only the keeper's trip was interrupted";
    const std::string marker = "interrupted at step ";
    const size_t at = t.error().find(marker);
    if (at != std::string::npos) {
      *recovered_at = t.error().substr(at + marker.size());
      recovered_at->resize(recovered_at->find_first_of(" ;,") == std::string::npos
                               ? recovered_at->size()
                               : recovered_at->find_first_of(" ;,"));
    }
  }
  // One trip was interrupted: at most it is aborted.
  EXPECT_LE(aborted, 1);
  CheckCrashInvariants(&r->f, *c, aborted);
}

TEST(PowerCutTest, AtEverySyncOfATripTheRestartKeepsEveryInvariant) {
  std::vector<SyncPoint> points;
  {
    PowerCutRun count;
    absl::Status s = StartOrchestratorUnderPowerCut(&count, "count", 0);
    ASSERT_TRUE(s.ok()) << s;
    auto c = count.f.stack->WaitForFinal("demo", 120);
    ASSERT_TRUE(c.ok()) << c.status();
    CheckCrashInvariants(&count.f, *c, 0);
    points = KeeperTripSyncs(count.f, count.config, kOrchestrator);
    StopCrashFixture(&count.f);
  }
  // A trip syncs its fencing token, its route_out, its checkpoint and its
  // finish at least.
  ASSERT_GE(points.size(), 4u);
  ASSERT_LE(points.size(), 24u) << "a bounded number of runs";
  for (const SyncPoint& p : points) {
    SCOPED_TRACE("power cut at sync " + p.Describe());
    PowerCutRun r;
    absl::Status s = StartOrchestratorUnderPowerCut(&r, "sync-" + std::to_string(p.n), p.n);
    ASSERT_TRUE(s.ok()) << s;
    std::string recovered_at;
    RestoreRestartAndCheck(&r, &recovered_at);
    ExpectCutAt(r.f, r.config, p);
    std::printf("cut at sync %ld: the keeper's trip %s\n", p.n,
                recovered_at.empty() ? "counted once (not aborted)"
                                     : ("aborted from step " + recovered_at).c_str());
    StopCrashFixture(&r.f);
    if (HasFatalFailure()) return;
  }
}

class PowerCutAtStepTest : public ::testing::TestWithParam<const char*> {};

// The keeper's trip (the third) loses power right after the commit of a step
// whose commit is not synced (state_store.h: the steps after route_out until
// training's commit), before the step's side effect: the disk still says
// route_out, while the GPU went out, was provisioned with the keeper's keys,
// came back or was re-keyed. (At the synced steps a power cut leaves what a
// crash leaves, which tests/crash_recovery_test.cc covers; the sync points
// above cover what the trip did up to each sync.)
TEST_P(PowerCutAtStepTest, RestartKeepsEveryInvariant) {
  const std::string step = GetParam();
  PowerCutRun r;
  absl::Status s =
      StartOrchestratorUnderPowerCut(&r, std::string("step-") + step, 0, "after_commit:" + step + "#3");
  ASSERT_TRUE(s.ok()) << s;
  std::string recovered_at;
  RestoreRestartAndCheck(&r, &recovered_at);
  // The cut lost the step's commit and the unsynced ones before it: recovery
  // found the trip where the last synced commit left it.
  EXPECT_EQ(recovered_at, kStepRouteOut) << "the power cut lost no unsynced step";
  StopCrashFixture(&r.f);
}

// From the trip's table (orchestrator/trip_steps.h): the steps after
// route_out up to the one recovery counts if trained.
std::vector<const char*> CutSteps() {
  std::vector<const char*> out;
  bool after_route_out = false;
  for (const TripStepRule& rule : TripStepTable()) {
    if (rule.recovery == TripRecovery::kCountIfTrained) break;
    if (after_route_out) out.push_back(rule.name);
    if (rule.step == TripStep::kRouteOut) after_route_out = true;
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryStep, PowerCutAtStepTest, ::testing::ValuesIn(CutSteps()),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

}  // namespace
}  // namespace gputravel
