// Crash safety (P7) when a daemon other than the orchestrator dies: the MUX,
// the emulated GPU or a holder agent is killed with SIGKILL at each step of
// a trip, in turn, in one campaign per party. The orchestrator is held at
// the step (GPUTRAVEL_FAILPOINT=hold:DIR, util/failpoint.h) while the test
// kills its peer, then released. The orchestrator must notice (the time
// from the kill is measured and printed as a table), the campaign must
// pause (a dead peer is no evidence against a holder, so the holder-failure
// policy does not drop it), and, once the peer is restarted (the MUX and
// the GPU always, as systemd would; a holder, or not) and the operator
// resumes (or skips the dead holder), complete with every window counted
// once, every buffer scrubbed before the next trip, and no key the
// key-keeping holder was handed working afterwards.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "orchestrator/trip_steps.h"
#include "proto/device.grpc.pb.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/key_keeping_holder.h"
#include "tests/stack_campaign.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kKeeper[] = "keeper";

// Who is killed, and what becomes of it.
struct Party {
  const char* name;       // test name
  const char* process;    // "mux", "gpu", or "" for the holder of the held trip
  bool restart;           // started again once the orchestrator noticed
  const char* on_failure; // the campaign's on_holder_failure
};

// What one kill showed.
struct KillRecord {
  std::string step;
  uint64_t trip = 0;
  std::string holder;
  double notice_ms = -1;  // kill -> the orchestrator's first event that shows it noticed
  std::string noticed_by;
  double safe_ms = -1;  // restart (or skip) -> campaign running again
};

class PeerCrashTest : public ::testing::TestWithParam<Party> {
 protected:
  void SetUp() override {
    const Party& p = GetParam();
    // The key keeper's Unix socket: a short path (TEST_TMPDIR can be too
    // long for one), like the stack's own directory.
    sock_dir_ = MakeSocketTestDir("gputravel-peer-");
    hold_dir_ = TestTmpDir() + "/hold-" + p.name;
    ASSERT_EQ(system(("rm -rf '" + hold_dir_ + "' && mkdir -p '" + hold_dir_ + "'").c_str()), 0);

    StackOptions o;
    const bool holder_party = std::string(p.process).empty();
    // Killing the MUX or the GPU: the key keeper's trips are the ones
    // interrupted (its kept keys are tried at the end), with two small real
    // holders beside it. Killing holders: the real holders' trips; with a
    // holder that stays dead, one holder per step (each is skipped in turn).
    if (!holder_party) {
      o.holders = 2;
      o.dataset_bytes = {256u << 10, 256u << 10};
      o.rounds = 2;
    } else if (p.restart) {
      o.holders = 2;
      o.dataset_bytes = {1u << 20, 1u << 20};
      o.rounds = 2;
    } else {
      o.holders = static_cast<int>(KillSteps().size());
      o.dataset_bytes.assign(o.holders, 1u << 20);
      o.rounds = 2;  // the last one killed still has windows to come
    }
    rounds_ = o.rounds;
    o.buffer_bytes = 256u << 10;
    o.chunk_bytes = 64u << 10;
    o.copy_engines = 2;  // two keys per hand-off
    o.eval_set = false;
    o.holder_training_policy["min_window_bytes"] = 4096;
    o.on_holder_failure = p.on_failure;
    o.log_level = 1;
    // To read the daemons' logs after a failure: --test_env=PEER_CRASH_KEEP=1
    // keeps the stack's directory.
    o.keep = getenv("PEER_CRASH_KEEP") != nullptr;
    KeyKeepingHolder::AddTo(&o, kKeeper, sock_dir_);
    // Every daemon started now inherits it; the test arms only the
    // orchestrator's hold points, and restarted daemons start without it.
    setenv("GPUTRAVEL_FAILPOINT", ("hold:" + hold_dir_).c_str(), 1);
    auto stack = EmulatedStack::Start(o);
    unsetenv("GPUTRAVEL_FAILPOINT");
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::move(*stack);
    auto keeper = KeyKeepingHolder::Serve(stack_.get(), kKeeper, sock_dir_);
    ASSERT_TRUE(keeper.ok()) << keeper.status();
    keeper_ = std::move(*keeper);
  }

  void TearDown() override {
    // A held orchestrator is released, so that it stops promptly.
    (void)system(("rm -rf '" + hold_dir_ + "'").c_str());
    keeper_.reset();
    if (stack_) stack_->Stop();
    stack_.reset();
    (void)system(("rm -rf '" + sock_dir_ + "'").c_str());
  }

  // The steps killed at: every one that recovery has a rule for
  // (orchestrator/trip_steps.h), so a step added there is killed at here.
  static std::vector<std::string> KillSteps() {
    std::vector<std::string> out;
    for (const TripStepRule& r : TripStepTable()) {
      if (r.recovery != TripRecovery::kNone) out.push_back(r.name);
    }
    return out;
  }

  std::string ArmPath(const std::string& step) const {
    return hold_dir_ + "/after_commit:" + step;
  }

  // The trip in flight (the newest unfinished one), and its holder's
  // dataset size.
  bool TripInFlight(v1::Trip* trip, uint64_t* dataset_bytes = nullptr) {
    v1::Campaign c = GetStackCampaign(stack_.get(), "demo", /*include_trips=*/true);
    bool found = false;
    for (const auto& t : c.trips()) {
      if (t.step() == v1::DONE || t.step() == v1::ABORTED) continue;
      if (!found || t.id() > trip->id()) {
        *trip = t;
        found = true;
      }
    }
    if (found && dataset_bytes != nullptr) {
      for (const auto& h : c.holders()) {
        if (h.name() == trip->holder()) *dataset_bytes = h.dataset_bytes();
      }
    }
    return found;
  }

  // Arms the hold at `step` and waits until the orchestrator holds there on a
  // trip that `want` accepts (given the trip and whether it is its holder's
  // last window); trips it does not are let through. The orchestrator is
  // left held (the caller releases it).
  bool HoldAt(const std::string& step,
              const std::function<bool(const v1::Trip&, bool last)>& want, v1::Trip* trip) {
    const std::string armed = ArmPath(step), held = armed + ".held";
    FILE* f = fopen(armed.c_str(), "w");
    if (f == nullptr) return false;
    fclose(f);
    const auto until = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < until) {
      if (access(held.c_str(), F_OK) != 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      uint64_t dataset = 0;
      if (TripInFlight(trip, &dataset)) {
        const bool last = trip->round() + 1 >= rounds_ &&
                          trip->window_offset() + trip->window_length() >= dataset;
        if (want(*trip, last)) return true;
      }
      // Not this one: armed again, then let through.
      f = fopen(armed.c_str(), "w");
      if (f == nullptr) return false;
      fclose(f);
      unlink(held.c_str());
    }
    return false;
  }

  void Release(const std::string& step) { unlink((ArmPath(step) + ".held").c_str()); }

  // The seq of the event that planned `trip` (0 if none).
  int64_t StartedSeq(uint64_t trip) {
    auto upto = RecordedEvents(stack_.get(), "demo", [trip](const v1::Event& e) {
      return e.kind() == v1::TRIP_STARTED && e.trip() == trip;
    });
    return upto.empty() ? 0 : upto.back().seq();
  }

  // Waits for the first event after `after_seq` that shows the orchestrator
  // noticed a failure: an error, a recovery, a trip finished otherwise than
  // ok, or the campaign pausing or failing.
  bool WaitForNotice(int64_t after_seq, double seconds, std::string* what) {
    auto noticed = [](const v1::Event& e) {
      const bool pausing = e.kind() == v1::CAMPAIGN_STATE &&
                           (e.campaign_state() == v1::PAUSED || e.campaign_state() == v1::FAILED);
      const bool finished_badly =
          e.kind() == v1::TRIP_FINISHED && e.message().rfind("ok", 0) != 0;
      return e.kind() == v1::ERROR || e.kind() == v1::RECOVERY || pausing || finished_badly;
    };
    const auto events = RecordedEvents(stack_.get(), "demo", noticed, after_seq, seconds);
    if (events.empty() || !noticed(events.back())) return false;
    const v1::Event& e = events.back();
    *what = v1::EventKind_Name(e.kind()) + " (trip " + std::to_string(e.trip()) + "): " +
            e.message().substr(0, 160);
    return true;
  }

  bool Skip(const std::string& holder) {
    auto stub = stack_->OperatorClient();
    for (int i = 0; i < 300; ++i) {
      v1::SkipHolderRequest req;
      req.set_campaign("demo");
      req.set_holder(holder);
      req.set_reason("its agent died and stays down");
      v1::Campaign c;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::Status s = stub->SkipHolder(&ctx, req, &c);
      if (s.ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::string sock_dir_, hold_dir_;
  uint32_t rounds_ = 1;
  std::unique_ptr<EmulatedStack> stack_;
  std::unique_ptr<KeyKeepingHolder> keeper_;
};

void PrintTable(const std::string& party, const std::vector<KillRecord>& kills) {
  std::printf("\n[peer-crash] party=%s: time from SIGKILL to the orchestrator noticing, and from "
              "restart/skip to the campaign running again\n",
              party.c_str());
  std::printf("[peer-crash] %-17s %-10s %5s %-10s %10s %10s  %s\n", "party", "step", "trip",
              "holder", "notice_ms", "safe_ms", "noticed by");
  for (const auto& k : kills) {
    std::printf("[peer-crash] %-17s %-10s %5llu %-10s %10.1f %10.1f  %s\n", party.c_str(),
                k.step.c_str(), static_cast<unsigned long long>(k.trip), k.holder.c_str(),
                k.notice_ms, k.safe_ms, k.noticed_by.c_str());
  }
  std::fflush(stdout);
}

TEST_P(PeerCrashTest, KilledAtEveryStepNoticedPausedAndRecovered) {
  const Party& p = GetParam();
  const bool holder_party = std::string(p.process).empty();
  ASSERT_TRUE(CreateAndStartCampaign(stack_.get(), std::string("peer-") + p.name).ok());
  std::set<std::string> dead;  // holders killed and left dead (skipped)
  std::vector<KillRecord> kills;
  for (const std::string& step : KillSteps()) {
    SCOPED_TRACE("killed at step " + step);
    KillRecord k;
    k.step = step;
    // MUX and GPU: at one of the keeper's trips. Holders: at a real holder's,
    // one not killed before. After provisioning, the trip needs neither the
    // holder nor (at train and scrub) the MUX again: the orchestrator notices
    // at a later trip, so not at a holder's last window.
    const bool contacts_holder_later =
        step == kStepPlanned || step == kStepRouteOut || step == kStepProvision;
    auto want = [&](const v1::Trip& t, bool last) {
      if (last && !contacts_holder_later) return false;
      if (!holder_party) return t.holder() == kKeeper;
      return t.holder() != kKeeper && dead.count(t.holder()) == 0;
    };
    v1::Trip held;
    ASSERT_TRUE(HoldAt(step, want, &held)) << "never held at " << step;
    k.trip = held.id();
    k.holder = held.holder();
    const std::string victim = holder_party ? k.holder : p.process;
    Subprocess* proc = stack_->process(victim);
    ASSERT_NE(proc, nullptr) << victim;
    // Nothing failed since the held trip was planned.
    const int64_t seq = StartedSeq(k.trip);
    ASSERT_GT(seq, 0);
    const auto killed = Clock::now();
    proc->Kill();  // returns once the process is gone
    ASSERT_FALSE(proc->Running()) << victim << " survived SIGKILL";
    Release(step);
    ASSERT_TRUE(WaitForNotice(seq, 60, &k.noticed_by))
        << "the orchestrator did not notice " << victim << "'s death within 60 s";
    k.notice_ms = std::chrono::duration<double, std::milli>(Clock::now() - killed).count();
    // Whoever died, the campaign pauses: a dead peer is no evidence against
    // the holder, so the holder is not dropped whatever the policy.
    v1::Campaign c;
    ASSERT_TRUE(WaitForCampaign(
        stack_.get(), "demo", 60, [](const v1::Campaign& c) { return c.state() == v1::PAUSED; },
        &c))
        << "not paused: " << v1::CampaignState_Name(c.state()) << " " << c.error();
    for (const auto& h : c.holders()) {
      EXPECT_NE(h.state(), "failed") << h.name() << " charged for " << victim << "'s death: "
                                     << h.error();
    }
    const auto restarted = Clock::now();
    if (holder_party && !p.restart) {
      dead.insert(victim);
      ASSERT_TRUE(Skip(victim)) << "the operator could not skip " << victim;
    } else {
      absl::Status s = stack_->Restart(victim);
      ASSERT_TRUE(s.ok()) << s;
      if (victim == "gpu") {
        // A restarted device is a new one: no session (every key of the old
        // ones, the holder's included, is gone) and no buffer (nothing of
        // the old memory to read). The orchestrator must re-key and find
        // the trip's buffer gone, never take the transport errors meanwhile
        // as "gone" (it paused instead).
        v1::DeviceStatus st = DeviceStatusNow(stack_.get());
        EXPECT_EQ(st.session_id(), 0u);
        EXPECT_EQ(st.buffers(), 0u);
      }
    }
    ASSERT_TRUE(ResumeCampaign(stack_.get(), "demo")) << "the campaign could not be resumed";
    ASSERT_TRUE(WaitForCampaign(
        stack_.get(), "demo", 60,
        [&](const v1::Campaign& c) {
          if (c.state() != v1::RUNNING && c.state() != v1::COMPLETED) return false;
          v1::Trip t;
          return !TripInFlight(&t) || t.id() != k.trip;
        },
        &c))
        << "trip " << k.trip << " not made safe: " << v1::CampaignState_Name(c.state()) << " "
        << c.error();
    k.safe_ms = std::chrono::duration<double, std::milli>(Clock::now() - restarted).count();
    kills.push_back(k);
    std::printf("[peer-crash] killed %s at %s (trip %llu, %s): noticed after %.1f ms by %s; "
                "running again %.1f ms after the restart or skip\n",
                victim.c_str(), step.c_str(), static_cast<unsigned long long>(k.trip),
                k.holder.c_str(), k.notice_ms, k.noticed_by.c_str(), k.safe_ms);
    std::fflush(stdout);
  }
  PrintTable(p.name, kills);
  auto c = stack_->WaitForFinal("demo", 180);
  ASSERT_TRUE(c.ok()) << c.status();
  // Any trip may have aborted or failed, and one whose GPU never left (its
  // holder died before) needs no scrub.
  CrashExpectation expected;
  expected.aborted = -1;
  expected.failed = -1;
  expected.skipped = dead;
  expected.every_trip_scrubbed = false;
  CheckCrashInvariants(stack_.get(), keeper_.get(), *c, expected);
  for (const auto& k : kills) {
    // Generous: a bound on noticing, not a timing assertion.
    EXPECT_LT(k.notice_ms, 60000) << k.step;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryParty, PeerCrashTest,
    ::testing::Values(Party{"mux", "mux", true, "skip"}, Party{"gpu", "gpu", true, "skip"},
                      Party{"holder_restarts", "", true, "skip"},
                      Party{"holder_stays_dead", "", false, "pause"}),
    [](const ::testing::TestParamInfo<Party>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace gputravel
