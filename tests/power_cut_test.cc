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
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "orchestrator/trip_steps.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/power_cut_image.h"
#include "tests/stack_campaign.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

// A stack whose orchestrator runs under the power cut: started as usual,
// stopped (cleanly) before any campaign, and started again with the preload
// library, so its state is durable when the model starts.
struct PowerCutRun {
  CrashFixture f;
  power_cut::Config config;
};

absl::Status StartUnderPowerCut(PowerCutRun* r, const std::string& name, long cut_at,
                                const std::string& failpoint = "") {
  // Trips a, b, keeper, a: the keeper's trip is interrupted, one follows.
  absl::Status s = StartCrashFixture(&r->f, {}, {3u << 20, 2u << 20});
  if (!s.ok()) return s;
  Subprocess* orch = r->f.stack->process("orchestrator");
  orch->Terminate();
  if (!WaitForExit(orch, 30)) return absl::InternalError("the orchestrator did not stop");
  r->config.shadow = TestTmpDir() + "/power-cut-" + name;
  (void)system(("rm -rf " + r->config.shadow).c_str());
  if (::mkdir(r->config.shadow.c_str(), 0700) != 0) {
    return absl::InternalError("cannot create " + r->config.shadow);
  }
  const std::string state = r->f.stack->dir() + "/state/";
  r->config.prefixes = {state + "orchestrator.", state + "checkpoint.key"};
  r->config.cut_at = cut_at;
  setenv("LD_PRELOAD", power_cut::PreloadLibrary().c_str(), 1);
  setenv(power_cut::kEnv, power_cut::FormatConfig(r->config).c_str(), 1);
  if (!failpoint.empty()) setenv("GPUTRAVEL_FAILPOINT", failpoint.c_str(), 1);
  s = r->f.stack->Restart("orchestrator");
  unsetenv("LD_PRELOAD");
  unsetenv(power_cut::kEnv);
  unsetenv("GPUTRAVEL_FAILPOINT");
  if (!s.ok()) return s;
  return CreateAndStartCampaign(r->f.stack.get(), "power-cut");
}

// Waits for the orchestrator to die (the cut or the failpoint), puts back
// what the disk kept, restarts it without the preload, and checks every
// invariant on the final campaign. `*recovered_at`: the step at which
// recovery found the keeper's interrupted trip, if it aborted it.
void RestoreRestartAndCheck(PowerCutRun* r, std::string* recovered_at) {
  Subprocess* orch = r->f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 90)) << "the power was never cut";
  ASSERT_TRUE(WIFSIGNALED(orch->exit_status()));
  EXPECT_EQ(WTERMSIG(orch->exit_status()), SIGKILL);
  std::string error;
  ASSERT_TRUE(power_cut::Restore(r->config, &error)) << error;
  absl::Status s = r->f.stack->Restart("orchestrator");
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

// `path` without the stack's directory (each run has its own).
std::string InStack(const std::string& path, const PowerCutRun& r) {
  const std::string& dir = r.f.stack->dir();
  return path.compare(0, dir.size(), dir) == 0 ? path.substr(dir.size()) : path;
}

// One sync of the keeper's trip: its number, and the trip's latest step
// recorded before it.
struct SyncPoint {
  long n;
  std::string after;
  std::string path;
};

// The syncs from the keeper's trip's start to the next trip's start (or the
// campaign's end), from a run that cut nothing.
std::vector<SyncPoint> KeeperTripSyncs(const std::vector<power_cut::SyncRecord>& syncs,
                                       const std::vector<v1::Event>& events) {
  uint64_t keeper_trip = 0;
  int64_t from = 0, to = 0;
  std::map<int64_t, std::string> steps;  // time -> step of the keeper's trip
  for (const auto& e : events) {
    if (e.kind() == v1::TRIP_STARTED && e.holder() == "keeper" && keeper_trip == 0) {
      keeper_trip = e.trip();
      from = e.time_unix_ms();
    } else if (e.kind() == v1::TRIP_STARTED && keeper_trip != 0 && to == 0) {
      to = e.time_unix_ms();
    }
    if (keeper_trip != 0 && e.trip() == keeper_trip && e.kind() == v1::STEP) {
      steps[e.time_unix_ms()] = v1::TripStep_Name(e.step());
    }
  }
  std::vector<SyncPoint> out;
  if (keeper_trip == 0) return out;
  for (const auto& s : syncs) {
    if (s.realtime_ms < from || (to != 0 && s.realtime_ms > to)) continue;
    auto it = steps.upper_bound(s.realtime_ms);
    out.push_back({s.n, it == steps.begin() ? "planned" : std::prev(it)->second, s.path});
  }
  return out;
}

TEST(PowerCutTest, AtEverySyncOfATripTheRestartKeepsEveryInvariant) {
  std::vector<SyncPoint> points;
  {
    PowerCutRun count;
    absl::Status s = StartUnderPowerCut(&count, "count", 0);
    ASSERT_TRUE(s.ok()) << s;
    auto c = count.f.stack->WaitForFinal("demo", 120);
    ASSERT_TRUE(c.ok()) << c.status();
    CheckCrashInvariants(&count.f, *c, 0);
    const auto syncs = power_cut::ReadSyncLog(count.config.shadow);
    points = KeeperTripSyncs(syncs, AllEvents(count.f.stack.get()));
    std::string list;
    for (auto& p : points) {
      p.path = InStack(p.path, count);
      list += " " + std::to_string(p.n) + " (after " + p.after + ", " + p.path + ")";
    }
    std::printf("%zu syncs in the campaign, %zu in the keeper's trip:%s\n", syncs.size(),
                points.size(), list.c_str());
    StopCrashFixture(&count.f);
  }
  // A trip syncs its fencing token, its route_out, its checkpoint and its
  // finish at least.
  ASSERT_GE(points.size(), 4u);
  ASSERT_LE(points.size(), 24u) << "a bounded number of runs";
  for (const SyncPoint& p : points) {
    SCOPED_TRACE("power cut at sync " + std::to_string(p.n) + " (after " + p.after + ", " +
                 p.path + ")");
    PowerCutRun r;
    absl::Status s = StartUnderPowerCut(&r, "sync-" + std::to_string(p.n), p.n);
    ASSERT_TRUE(s.ok()) << s;
    std::string recovered_at;
    RestoreRestartAndCheck(&r, &recovered_at);
    const power_cut::SyncRecord cut = power_cut::CutAt(r.config.shadow);
    EXPECT_EQ(cut.n, p.n);
    // The orchestrator asks for its syncs in the same order run after run;
    // were it not to, this run cut a neighbouring sync, still a valid cut.
    if (InStack(cut.path, r) != p.path) {
      std::printf("sync %ld was %s here, %s in the counting run\n", p.n,
                  InStack(cut.path, r).c_str(), p.path.c_str());
    }
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
      StartUnderPowerCut(&r, std::string("step-") + step, 0, "after_commit:" + step + "#3");
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
