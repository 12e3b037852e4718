// Crash recovery (P7): the orchestrator is killed with SIGKILL at each step
// of a trip in turn, and restarted. The campaign must complete, every trip
// must be counted exactly once (each holder's dataset is covered by
// successful windows exactly once), no key a holder was handed may still
// work, and every buffer is scrubbed and verified before the next holder.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
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
#include "tests/key_keeping_holder.h"
#include "tests/stack_campaign.h"

namespace gputravel {
namespace {

struct Fixture {
  std::string dir;
  std::unique_ptr<EmulatedStack> stack;
  std::unique_ptr<KeyKeepingHolder> keeper;
};

// Two real holders (3 MiB and 5.5 MiB) and the key keeper (1 MiB), a 2 MiB
// buffer: round-robin trips a, b, keeper, a, b, b.
absl::Status StartFixture(Fixture* f, const std::string& failpoint) {
  char tmpl[] = "/tmp/gputravel-crash-XXXXXX";
  f->dir = mkdtemp(tmpl);
  StackOptions o;
  o.holders = 2;
  o.buffer_bytes = 2u << 20;
  o.chunk_bytes = 512u << 10;
  o.copy_engines = 2;  // each window through two engines: two keys per hand-off to kill
  o.log_level = 1;
  KeyKeepingHolder::AddTo(&o, "keeper", f->dir);
  // Children inherit the environment at start: only this orchestrator run
  // carries the failpoint, not the restarted one.
  if (!failpoint.empty()) setenv("GPUTRAVEL_FAILPOINT", failpoint.c_str(), 1);
  auto stack = EmulatedStack::Start(o);
  unsetenv("GPUTRAVEL_FAILPOINT");
  if (!stack.ok()) return stack.status();
  f->stack = std::move(*stack);
  auto keeper = KeyKeepingHolder::Serve(f->stack.get(), "keeper", f->dir);
  if (!keeper.ok()) return keeper.status();
  f->keeper = std::move(*keeper);
  return absl::OkStatus();
}

void StopFixture(Fixture* f) {
  f->keeper.reset();
  if (f->stack) f->stack->Stop();
  f->stack.reset();
  (void)system(("rm -rf " + f->dir).c_str());
}

absl::Status CreateAndStart(EmulatedStack* stack) {
  auto stub = stack->OperatorClient();
  v1::CreateCampaignRequest req;
  req.set_request_id("crash-test");
  req.set_spec_json(stack->CampaignSpec().dump());
  v1::CreateCampaignResponse created;
  grpc::ClientContext ctx;
  if (!stub->CreateCampaign(&ctx, req, &created).ok()) {
    return absl::InternalError("create failed");
  }
  v1::CampaignRef ref;
  ref.set_name("demo");
  v1::Campaign c;
  grpc::ClientContext ctx2;
  grpc::Status s = stub->StartCampaign(&ctx2, ref, &c);
  return s.ok() ? absl::OkStatus() : absl::InternalError(s.error_message());
}

bool WaitForExit(Subprocess* p, double seconds) {
  auto until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (p->Running()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<v1::Event> AllEvents(EmulatedStack* stack) {
  auto stub = stack->OperatorClient();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::WatchCampaignRequest req;
  req.set_name("demo");
  auto reader = stub->WatchCampaign(&ctx, req);
  std::vector<v1::Event> out;
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.seq() != 0) out.push_back(e);
  }
  (void)reader->Finish();
  return out;
}

// The invariants every crash must leave intact.
void CheckInvariants(Fixture* f, const v1::Campaign& c, int expected_aborted) {
  EXPECT_EQ(c.state(), v1::COMPLETED) << c.error();
  std::set<uint64_t> ids;
  int aborted = 0;
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> windows;
  for (const auto& t : c.trips()) {
    EXPECT_TRUE(ids.insert(t.id()).second) << "trip " << t.id() << " twice";
    EXPECT_TRUE(t.scrub_verified()) << "trip " << t.id() << " not scrubbed";
    EXPECT_TRUE(t.rekeyed()) << "trip " << t.id() << " not re-keyed";
    if (t.outcome() == "aborted") {
      ++aborted;
      EXPECT_EQ(t.step(), v1::ABORTED);
    } else {
      EXPECT_EQ(t.outcome(), "ok") << "trip " << t.id() << ": " << t.error();
      EXPECT_TRUE(t.digest_match()) << "trip " << t.id();
      windows[t.holder()].push_back({t.window_offset(), t.window_length()});
    }
  }
  EXPECT_EQ(aborted, expected_aborted);
  EXPECT_EQ(c.trips_ok() + c.trips_failed(), static_cast<uint64_t>(c.trips_size()));
  // Each dataset covered by successful windows exactly once: counted once.
  for (const auto& h : c.holders()) {
    auto& w = windows[h.name()];
    std::sort(w.begin(), w.end());
    uint64_t at = 0;
    for (const auto& x : w) {
      EXPECT_EQ(x.first, at) << h.name() << ": window counted twice or missing";
      at = x.first + x.second;
    }
    EXPECT_EQ(at, h.dataset_bytes()) << h.name();
    EXPECT_EQ(h.state(), "done") << h.name();
  }
  // No key handed to the keeper still works, including one handed out in the
  // interrupted trip.
  auto tries = f->keeper->TryKeptKeys(f->stack.get());
  ASSERT_TRUE(tries.ok()) << tries.status();
  EXPECT_EQ(tries->accepted, 0);
  EXPECT_EQ(tries->other, 0);
  // Scrubbed before the next holder: every trip finished (after its scrub
  // was verified) before the next one was planned.
  ExpectTripsOneAtATime(AllEvents(f->stack.get()));
}

// Times the emulated GPU's memory was wiped (DeviceAdmin: the host's view).
uint64_t MemoryWipes(EmulatedStack* stack) {
  auto admin = v1::DeviceAdmin::NewStub(MakeChannel(stack->device_admin_endpoint()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetStatusRequest req;
  v1::DeviceStatus st;
  EXPECT_TRUE(admin->GetStatus(&ctx, req, &st).ok());
  return st.memory_wipes();
}

class CrashAtStepTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CrashAtStepTest, RestartCompletesCountsOnceAndLeavesNoLiveKey) {
  const std::string step = GetParam();
  Fixture f;
  // The third trip is the keeper's: it is the one interrupted.
  absl::Status s = StartFixture(&f, "after_commit:" + step + "#3");
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStart(f.stack.get()).ok());
  Subprocess* orch = f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 60)) << "the failpoint never fired";
  ASSERT_TRUE(WIFSIGNALED(orch->exit_status()));
  EXPECT_EQ(WTERMSIG(orch->exit_status()), SIGKILL);
  const uint64_t wipes = MemoryWipes(f.stack.get());

  s = f.stack->Restart("orchestrator");
  ASSERT_TRUE(s.ok()) << s;
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  // The authorisation to keep device memory died with the killed process's
  // session keys: the restarted orchestrator's first exchange wiped the
  // interrupted window, which nobody read, and it was planned again.
  EXPECT_GT(MemoryWipes(f.stack.get()), wipes);
  // Killed after training was committed (this campaign trains, so its
  // trips reach scrub with the checkpoint): the trip counts, nothing is
  // aborted. Every other step's recovery aborts the trip.
  const std::optional<TripStep> at = TripStepFromString(step);
  ASSERT_TRUE(at.has_value()) << step;
  const int expected_aborted = RecoveryFor(*at) == TripRecovery::kCountIfTrained ? 0 : 1;
  CheckInvariants(&f, *c, expected_aborted);
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
  StopFixture(&f);
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
  Fixture f;
  absl::Status s = StartFixture(&f, "after_commit:provision#3");
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStart(f.stack.get()).ok());
  Subprocess* orch = f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 60)) << "the failpoint never fired";
  Subprocess* mux = f.stack->process("mux");
  ASSERT_NE(mux, nullptr);
  mux->Kill();
  ASSERT_TRUE(WaitForExit(mux, 10));
  s = f.stack->Restart("orchestrator");
  ASSERT_TRUE(s.ok()) << s;

  auto stub = f.stack->OperatorClient();
  v1::CampaignRef ref;
  ref.set_name("demo");
  v1::Campaign cancelled;
  {
    grpc::ClientContext ctx;
    grpc::Status st = stub->CancelCampaign(&ctx, ref, &cancelled);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(cancelled.state(), v1::CANCELLING);
  // Still CANCELLING while the MUX stays down (recovery retries every 2 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  {
    v1::Campaign now;
    grpc::ClientContext ctx;
    v1::GetCampaignRequest get;
    get.set_name("demo");
    ASSERT_TRUE(stub->GetCampaign(&ctx, get, &now).ok());
    EXPECT_EQ(now.state(), v1::CANCELLING);
  }

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
  StopFixture(&f);
}

std::string ReadLog(EmulatedStack* stack, const std::string& daemon) {
  std::string path = stack->logs()[daemon];
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

// Recovery that cannot read the campaign of an interrupted trip (here the
// first read fails, as a storage error would) must not skip the trip, which
// would leave the GPU with a holder and the trip unfinished: it retries, and
// the campaign completes with every invariant.
TEST(CrashRecoveryTest, RecoveryRetriesATripWhoseCampaignItCannotRead) {
  Fixture f;
  absl::Status s = StartFixture(&f, "after_commit:provision#3");
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStart(f.stack.get()).ok());
  Subprocess* orch = f.stack->process("orchestrator");
  ASSERT_TRUE(WaitForExit(orch, 60)) << "the failpoint never fired";
  setenv("GPUTRAVEL_FAILPOINT", "error:recovery_get_campaign#1", 1);
  s = f.stack->Restart("orchestrator");
  unsetenv("GPUTRAVEL_FAILPOINT");
  ASSERT_TRUE(s.ok()) << s;
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckInvariants(&f, *c, 1);
  std::string log = ReadLog(f.stack.get(), "orchestrator");
  EXPECT_NE(log.find("of campaign 'demo': failpoint error:recovery_get_campaign#1"),
            std::string::npos)
      << "the injected error never reached recovery";
  bool recovered = false;
  for (const auto& e : AllEvents(f.stack.get())) {
    if (e.kind() == v1::RECOVERY && e.holder() == "keeper") recovered = true;
  }
  EXPECT_TRUE(recovered);
  StopFixture(&f);
}

// A campaign whose new buffer cannot be recorded pauses before any trip (a
// trip in an unrecorded buffer would be scrubbed in the wrong one by
// recovery); resumed, it completes.
TEST(CrashRecoveryTest, ABufferThatCannotBeRecordedPausesBeforeAnyTrip) {
  Fixture f;
  absl::Status s = StartFixture(&f, "error:record_buffer#1");
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStart(f.stack.get()).ok());
  auto stub = f.stack->OperatorClient();
  v1::Campaign now;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    grpc::ClientContext ctx;
    v1::GetCampaignRequest get;
    get.set_name("demo");
    ASSERT_TRUE(stub->GetCampaign(&ctx, get, &now).ok());
  } while (now.state() == v1::RUNNING && std::chrono::steady_clock::now() < until);
  ASSERT_EQ(now.state(), v1::PAUSED);
  EXPECT_NE(now.error().find("recording the dataset buffer"), std::string::npos)
      << now.error();
  EXPECT_EQ(now.trips_size(), 0) << "a trip ran in a buffer the campaign does not record";

  v1::CampaignRef ref;
  ref.set_name("demo");
  v1::Campaign resumed;
  grpc::ClientContext ctx;
  grpc::Status st = stub->ResumeCampaign(&ctx, ref, &resumed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckInvariants(&f, *c, 0);
  StopFixture(&f);
}

// Killed from outside at arbitrary moments, three times in one campaign.
TEST(CrashRecoveryTest, RepeatedExternalSigkillStillCompletesExactlyOnce) {
  Fixture f;
  absl::Status s = StartFixture(&f, "");
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStart(f.stack.get()).ok());
  std::mt19937 rng(7);
  Subprocess* orch = f.stack->process("orchestrator");
  int kills = 0;
  for (int kill = 0; kill < 3; ++kill) {
    // Let it make some progress: a few step events.
    int wanted = 3 + static_cast<int>(rng() % 6), seen = 0;
    auto stub = f.stack->OperatorClient();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchCampaignRequest req;
    req.set_name("demo");
    auto all = AllEvents(f.stack.get());
    req.set_after_seq(all.empty() ? 0 : all.back().seq());
    auto reader = stub->WatchCampaign(&ctx, req);
    v1::Event e;
    bool final_state = false;
    while (reader->Read(&e)) {
      if (e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == v1::COMPLETED) {
        final_state = true;
      }
      if (e.kind() == v1::STEP && ++seen >= wanted) break;
    }
    if (final_state) break;
    orch->Kill();
    ++kills;
    ctx.TryCancel();
    (void)reader->Finish();
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
  CheckInvariants(&f, *c, aborted);
  StopFixture(&f);
}

// P5 across a crash: the host kills the orchestrator while the keeper
// provisions on GPU A, then has the restarted orchestrator reach another
// genuine GPU B of the same device CA (here: a configuration edited to name
// B's endpoint and serial). B's word that the buffer is "gone" (authentic,
// but from the wrong device) must not make the trip safe: recovery refuses
// B, naming both serials, and keeps retrying; with the configuration
// restored, recovery re-keys and scrubs A and the campaign completes.
TEST(CrashRecoveryTest, RecoveryOnlyAcceptsTheGpuTheTripRanOn) {
  Fixture f;
  absl::Status s = StartFixture(&f, "after_commit:provision#3");
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(CreateAndStart(f.stack.get()).ok());
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
  bool refused = false;
  for (int i = 0; i < 150 && !refused; ++i) {
    for (const auto& e : AllEvents(f.stack.get())) {
      if (e.kind() == v1::ERROR &&
          e.message().find("answers as serial EMU-H100-0002, but the trip's key and buffer "
                           "are on serial EMU-H100-0001") != std::string::npos) {
        refused = true;
      }
    }
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(refused) << "recovery refused GPU B, naming both serials";
  for (const auto& e : AllEvents(f.stack.get())) {
    EXPECT_NE(e.kind(), v1::RECOVERY) << "no trip was made safe on GPU B: " << e.message();
  }

  // The configuration restored: recovery finds GPU A, and all is well.
  f.stack->process("orchestrator")->Kill();
  ASSERT_TRUE(WaitForExit(f.stack->process("orchestrator"), 30));
  ASSERT_TRUE(WriteFile(config_path, *original, 0600).ok());
  ASSERT_TRUE(f.stack->Restart("orchestrator").ok());
  auto c = f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckInvariants(&f, *c, 1);
  server->Shutdown();
  StopFixture(&f);
}

}  // namespace
}  // namespace gputravel
