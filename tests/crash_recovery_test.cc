// Crash recovery (P7): the orchestrator is killed with SIGKILL at each step
// of a trip in turn, and restarted. The campaign must complete, every trip
// must be counted exactly once (each holder's dataset is covered by
// successful windows exactly once), no key a holder was handed may still
// work, and every buffer is scrubbed and verified before the next holder.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <optional>
#include <random>
#include <vector>

#include "cli/emulated_stack.h"
#include "device/device_service.h"
#include "device/emulated_gpu.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "nlohmann/json.hpp"
#include "orchestrator/trip_steps.h"
#include "util/files.h"
#include "grpcpp/grpcpp.h"
#include "proto/device.grpc.pb.h"
#include "util/grpc_status.h"
#include "gtest/gtest.h"
#include "tests/crash_fixture.h"
#include "tests/stack_campaign.h"

namespace gputravel {
namespace {

class CrashAtStepTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CrashAtStepTest, RestartCompletesCountsOnceAndLeavesNoLiveKey) {
  const std::string step = GetParam();
  CrashFixture f;
  // The third trip is the keeper's: it is the one interrupted.
  absl::Status s =
      StartCrashFixture(&f, {{"GPUTRAVEL_FAILPOINT", "after_commit:" + step + "#3"}});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStartCampaign(f.stack.get(), "crash-test").ok());
  Subprocess* orch = f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 60)) << "the failpoint never fired";
  ASSERT_TRUE(WIFSIGNALED(orch->exit_status()));
  EXPECT_EQ(WTERMSIG(orch->exit_status()), SIGKILL);
  const uint64_t wipes = DeviceStatusNow(f.stack.get()).memory_wipes();

  s = f.stack->Restart("orchestrator");
  ASSERT_TRUE(s.ok()) << s;
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  // The authorisation to keep device memory died with the killed process's
  // session keys: the restarted orchestrator's first exchange wiped the
  // interrupted window, which nobody read, and it was planned again.
  EXPECT_GT(DeviceStatusNow(f.stack.get()).memory_wipes(), wipes);
  // Killed after training was committed (this campaign trains, so its
  // trips reach scrub with the checkpoint): the trip counts, nothing is
  // aborted. Every other step's recovery aborts the trip.
  const std::optional<TripStep> at = TripStepFromString(step);
  ASSERT_TRUE(at.has_value()) << step;
  const int expected_aborted = RecoveryFor(*at) == TripRecovery::kCountIfTrained ? 0 : 1;
  CheckCrashInvariants(&f, *c, expected_aborted);
  bool recovered = false;
  for (const auto& e : AllEvents(f.stack.get())) {
    if (e.kind() == v1::RECOVERY && e.holder() == "keeper") recovered = true;
  }
  EXPECT_TRUE(recovered) << "a RECOVERY event names the interrupted trip";
  // The model continued from its checkpoint, not from scratch: the last
  // window of real text scores better than the first one did.
  const v1::Trip* first = nullptr;
  const v1::Trip* last = nullptr;
  for (const auto& t : c->trips()) {
    if (!t.has_loss()) continue;
    if (first == nullptr) first = &t;
    last = &t;
  }
  ASSERT_NE(first, nullptr);
  EXPECT_LT(last->loss(), first->loss());
  StopCrashFixture(&f);
}

// The kill points come from the trip's table (orchestrator/trip_steps.h):
// one after the commit of every step that recovery has a rule for, so a
// step added there is crashed at here.
std::vector<const char*> KillPoints() {
  std::vector<const char*> out;
  for (const TripStepRule& r : TripStepTable()) {
    if (r.recovery != TripRecovery::kNone) out.push_back(r.name);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryStep, CrashAtStepTest, ::testing::ValuesIn(KillPoints()),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// A campaign cancelled while recovery cannot yet make its interrupted trip
// safe (the MUX is down, so the keeper may still have the GPU) is CANCELLING,
// not CANCELLED, until recovery has routed the GPU home, re-keyed and
// scrubbed; then it is CANCELLED.
TEST(CrashRecoveryTest, CancelDuringRecoveryWaitsUntilTheTripIsSafe) {
  CrashFixture f;
  absl::Status s = StartCrashFixture(&f, {{"GPUTRAVEL_FAILPOINT", "after_commit:provision#3"}});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStartCampaign(f.stack.get(), "crash-test").ok());
  Subprocess* orch = f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 60)) << "the failpoint never fired";
  Subprocess* mux = f.stack->process("mux");
  ASSERT_NE(mux, nullptr);
  mux->Kill();
  ASSERT_TRUE(WaitForExit(mux, 10));
  s = f.stack->Restart("orchestrator");
  ASSERT_TRUE(s.ok()) << s;

  auto stub = f.stack->OperatorClient();
  v1::Campaign cancelled;
  grpc::Status st = ControlCampaign(stub.get(), "cancel", "demo", &cancelled);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(cancelled.state(), v1::CANCELLING);
  // Still CANCELLING after a recovery pass that ran after the cancel failed
  // with the MUX down (recovery retries every 2 s): the test waits for that
  // pass's ERROR event, not for a time.
  bool seen_cancelling = false;
  auto failed_pass = [&seen_cancelling](const v1::Event& e) {
    if (e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == v1::CANCELLING) {
      seen_cancelling = true;
    }
    return seen_cancelling && e.kind() == v1::ERROR &&
           e.message().find("recovery could not make the GPU safe yet") != std::string::npos;
  };
  const std::vector<v1::Event> events = RecordedEvents(f.stack.get(), "demo", failed_pass);
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(failed_pass(events.back())) << "no recovery pass failed after the cancel";
  EXPECT_EQ(GetStackCampaign(f.stack.get(), "demo").state(), v1::CANCELLING);

  s = f.stack->Restart("mux");
  ASSERT_TRUE(s.ok()) << s;
  auto c = f.stack->WaitForFinal("demo", 60);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state(), v1::CANCELLED);
  for (const auto& t : c->trips()) {
    EXPECT_TRUE(t.scrub_verified()) << "trip " << t.id() << " not scrubbed";
    EXPECT_NE(t.step(), v1::PROVISION) << "trip " << t.id() << " left unfinished";
  }
  // The recovery happened before the cancel completed.
  int64_t recovery_seq = 0, cancelled_seq = 0;
  for (const auto& e : AllEvents(f.stack.get())) {
    if (e.kind() == v1::RECOVERY && e.holder() == "keeper") recovery_seq = e.seq();
    if (e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == v1::CANCELLED) {
      cancelled_seq = e.seq();
    }
  }
  EXPECT_GT(recovery_seq, 0);
  EXPECT_GT(cancelled_seq, recovery_seq);
  StopCrashFixture(&f);
}

// Recovery that cannot read the campaign of an interrupted trip (here the
// first read fails, as a storage error would) must not skip the trip, which
// would leave the GPU with a holder and the trip unfinished: it retries, and
// the campaign completes with every invariant.
TEST(CrashRecoveryTest, RecoveryRetriesATripWhoseCampaignItCannotRead) {
  CrashFixture f;
  absl::Status s = StartCrashFixture(&f, {{"GPUTRAVEL_FAILPOINT", "after_commit:provision#3"}});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStartCampaign(f.stack.get(), "crash-test").ok());
  Subprocess* orch = f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 60)) << "the failpoint never fired";
  setenv("GPUTRAVEL_FAILPOINT", "error:recovery_get_campaign#1", 1);
  s = f.stack->Restart("orchestrator");
  unsetenv("GPUTRAVEL_FAILPOINT");
  ASSERT_TRUE(s.ok()) << s;
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckCrashInvariants(&f, *c, 1);
  const std::string log = ReadFile(f.stack->logs()["orchestrator"]).value_or("");
  EXPECT_NE(log.find("of campaign 'demo': failpoint error:recovery_get_campaign#1"),
            std::string::npos)
      << "the injected error never reached recovery";
  bool recovered = false;
  for (const auto& e : AllEvents(f.stack.get())) {
    if (e.kind() == v1::RECOVERY && e.holder() == "keeper") recovered = true;
  }
  EXPECT_TRUE(recovered);
  StopCrashFixture(&f);
}

// A campaign whose new buffer cannot be recorded pauses before any trip (a
// trip in an unrecorded buffer would be scrubbed in the wrong one by
// recovery); resumed, it completes.
TEST(CrashRecoveryTest, ABufferThatCannotBeRecordedPausesBeforeAnyTrip) {
  CrashFixture f;
  absl::Status s = StartCrashFixture(&f, {{"GPUTRAVEL_FAILPOINT", "error:record_buffer#1"}});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStartCampaign(f.stack.get(), "crash-test").ok());
  v1::Campaign now;
  WaitForCampaign(
      f.stack.get(), "demo", 30, [](const v1::Campaign& c) { return c.state() != v1::RUNNING; },
      &now);
  ASSERT_EQ(now.state(), v1::PAUSED);
  EXPECT_NE(now.error().find("recording the dataset buffer"), std::string::npos)
      << now.error();
  EXPECT_EQ(now.trips_size(), 0) << "a trip ran in a buffer the campaign does not record";

  auto stub = f.stack->OperatorClient();
  v1::Campaign resumed;
  grpc::Status st = ControlCampaign(stub.get(), "resume", "demo", &resumed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckCrashInvariants(&f, *c, 0);
  StopCrashFixture(&f);
}

// Killed from outside at arbitrary moments, three times in one campaign.
TEST(CrashRecoveryTest, RepeatedExternalSigkillStillCompletesExactlyOnce) {
  CrashFixture f;
  absl::Status s = StartCrashFixture(&f);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStartCampaign(f.stack.get(), "crash-test").ok());
  std::mt19937 rng(7);
  Subprocess* orch = f.stack->process("orchestrator");
  int kills = 0;
  int64_t last_seq = 0;  // the last recorded event read so far
  for (int kill = 0; kill < 3; ++kill) {
    // Let it make some progress: a few step events after those read before.
    const int wanted = 3 + static_cast<int>(rng() % 6);
    int seen = 0;
    bool final_state = false;
    const auto events = RecordedEvents(
        f.stack.get(), "demo",
        [&](const v1::Event& e) {
          if (e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == v1::COMPLETED) {
            final_state = true;
          }
          return e.kind() == v1::STEP && ++seen >= wanted;
        },
        last_seq, 30);
    if (!events.empty()) last_seq = events.back().seq();
    if (final_state) break;
    orch->Kill();
    ++kills;
    ASSERT_TRUE(WaitForExit(orch, 10));
    s = f.stack->Restart("orchestrator");
    ASSERT_TRUE(s.ok()) << s;
  }
  // The campaign (about 36 step events) outlasts three kills of at most 8
  // step events each: every kill happened mid-campaign.
  EXPECT_EQ(kills, 3) << "the campaign completed before every kill";
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  int aborted = 0;
  for (const auto& t : c->trips()) aborted += t.outcome() == "aborted";
  EXPECT_LE(aborted, kills);
  CheckCrashInvariants(&f, *c, aborted);
  StopCrashFixture(&f);
}

// P5 across a crash: the host kills the orchestrator while the keeper
// provisions on GPU A, then has the restarted orchestrator reach another
// genuine GPU B of the same device CA (here: a configuration edited to name
// B's endpoint and serial). B's word that the buffer is "gone" (authentic,
// but from the wrong device) must not make the trip safe: recovery refuses
// B, naming both serials, and keeps retrying; with the configuration
// restored, recovery re-keys and scrubs A and the campaign completes.
TEST(CrashRecoveryTest, RecoveryOnlyAcceptsTheGpuTheTripRanOn) {
  CrashFixture f;
  absl::Status s = StartCrashFixture(&f, {{"GPUTRAVEL_FAILPOINT", "after_commit:provision#3"}});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStartCampaign(f.stack.get(), "crash-test").ok());
  Subprocess* orch = f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 60)) << "the failpoint never fired";

  // GPU B: another genuine device of the same CA, in this process.
  auto ca_key_pem = ReadFile(f.stack->pki().device_ca_key);
  ASSERT_TRUE(ca_key_pem.ok()) << ca_key_pem.status();
  auto ca_key = EcKey::FromPrivatePem(*ca_key_pem);
  ASSERT_TRUE(ca_key.ok()) << ca_key.status();
  auto ca_der = CertificatePemToDer(*ReadFile(f.stack->pki().device_ca_cert));
  ASSERT_TRUE(ca_der.ok()) << ca_der.status();
  auto b_key = *EcKey::Generate(Curve::kP384);
  auto b_cert = IssueCertificate(b_key, "EMU-H100-0002", *ca_key, *ca_der, false, 1);
  ASSERT_TRUE(b_cert.ok()) << b_cert.status();
  EmulatedGpuOptions bo;
  bo.serial = "EMU-H100-0002";
  EmulatedGpu gpu_b(bo, std::move(b_key), *b_cert);
  gpu_b.SetOwner(EmulatedStack::kOrchestratorDomain);
  DeviceServiceImpl b_service(&gpu_b, EmulatedStack::kOrchestratorDomain);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + f.dir + "/gpu-b.sock", grpc::InsecureServerCredentials());
  b.SetMaxReceiveMessageSize(kMaxMessageBytes);
  b.SetMaxSendMessageSize(kMaxMessageBytes);
  b.RegisterService(&b_service);
  auto server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);

  const std::string config_path = f.stack->dir() + "/orchestrator.json";
  auto original = ReadFile(config_path);
  ASSERT_TRUE(original.ok()) << original.status();
  nlohmann::json edited = nlohmann::json::parse(*original);
  edited["gpus"][0]["serial"] = "EMU-H100-0002";
  edited["gpus"][0]["device_endpoint"] = "unix:" + f.dir + "/gpu-b.sock";
  ASSERT_TRUE(WriteFile(config_path, edited.dump(), 0600).ok());
  ASSERT_TRUE(f.stack->Restart("orchestrator").ok());

  // Recovery names the mismatch and retries; nothing else runs.
  auto refused = [](const v1::Event& e) {
    return e.kind() == v1::ERROR &&
           e.message().find("answers as serial EMU-H100-0002, but the trip's key and buffer "
                            "are on serial EMU-H100-0001") != std::string::npos;
  };
  const auto events = RecordedEvents(f.stack.get(), "demo", refused, 0, 30);
  EXPECT_TRUE(!events.empty() && refused(events.back()))
      << "recovery refused GPU B, naming both serials";
  for (const auto& e : events) {
    EXPECT_NE(e.kind(), v1::RECOVERY) << "no trip was made safe on GPU B: " << e.message();
  }

  // The configuration restored: recovery finds GPU A, and all is well.
  f.stack->process("orchestrator")->Kill();
  ASSERT_TRUE(WaitForExit(f.stack->process("orchestrator"), 30));
  ASSERT_TRUE(WriteFile(config_path, *original, 0600).ok());
  ASSERT_TRUE(f.stack->Restart("orchestrator").ok());
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckCrashInvariants(&f, *c, 1);
  server->Shutdown();
  StopCrashFixture(&f);
}

}  // namespace
}  // namespace gputravel
