// End-to-end: the real daemons (emulated GPU, MUX, holder agents,
// orchestrator) as separate processes, real gRPC with mTLS over Unix
// sockets, real cryptography, real bytes in device memory, driven through
// the scheduler API.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "auth/pki.h"
#include "auth/revocation_list.h"
#include "auth/tls_config.h"
#include "device/device_relay.h"
#include "device/gpu_session.h"
#include "cli/emulated_stack.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "holder_agent/dataset.h"
#include "keyxfer/cc_channel.h"
#include "keyxfer/random.h"
#include "keyxfer/report_seal.h"
#include "keyxfer/secret_bytes.h"
#include "keyxfer/x509.h"
#include "proto/device.grpc.pb.h"
#include "tests/gpu_contact.h"
#include "tests/key_keeping_holder.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/hex.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

grpc::Status Create(v1::Orchestrator::Stub* stub, const nlohmann::json& spec,
                    const std::string& request_id, v1::CreateCampaignResponse* out) {
  v1::CreateCampaignRequest req;
  req.set_request_id(request_id);
  req.set_spec_json(spec.dump());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub->CreateCampaign(&ctx, req, out);
}

grpc::Status Control(v1::Orchestrator::Stub* stub, const std::string& what,
                     const std::string& name, v1::Campaign* out) {
  v1::CampaignRef ref;
  ref.set_name(name);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (what == "start") return stub->StartCampaign(&ctx, ref, out);
  if (what == "pause") return stub->PauseCampaign(&ctx, ref, out);
  if (what == "resume") return stub->ResumeCampaign(&ctx, ref, out);
  return stub->CancelCampaign(&ctx, ref, out);
}

// An operator takes `holder` out of paused campaign `name` (SkipHolder).
grpc::Status Skip(v1::Orchestrator::Stub* stub, const std::string& name,
                  const std::string& holder, const std::string& reason) {
  v1::SkipHolderRequest req;
  req.set_campaign(name);
  req.set_holder(holder);
  req.set_reason(reason);
  v1::Campaign out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub->SkipHolder(&ctx, req, &out);
}

// Streams the campaign's events until `stop` returns true (true) or the
// stream ends (false).
bool WatchUntil(v1::Orchestrator::Stub* stub, const std::string& name,
                const std::function<bool(const v1::Event&)>& stop) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::WatchCampaignRequest req;
  req.set_name(name);
  auto reader = stub->WatchCampaign(&ctx, req);
  v1::Event ev;
  while (reader->Read(&ev)) {
    if (stop(ev)) {
      ctx.TryCancel();
      (void)reader->Finish();
      return true;
    }
  }
  (void)reader->Finish();
  return false;
}

// A stack with the key-keeping holder "keeper" served from this process;
// the destructor stops everything and removes the keeper's directory.
struct KeeperStack {
  std::string dir;
  std::unique_ptr<EmulatedStack> stack;
  std::unique_ptr<KeyKeepingHolder> keeper;
  std::vector<std::unique_ptr<KeyKeepingHolder>> others;  // StartKeeperStack's `more`
  ~KeeperStack() {
    keeper.reset();
    others.clear();
    if (stack) stack->Stop();
    stack.reset();
    if (!dir.empty()) (void)system(("rm -rf " + dir).c_str());
  }
};

// Starts the stack `o` describes, with the keeper added to it, and a
// key-keeping holder of each name in `more` (in ks->others).
void StartKeeperStack(StackOptions o, KeeperStack* ks,
                      const std::vector<std::string>& more = {}) {
  ks->dir = MakeSocketTestDir("gputravel-keeper-");
  KeyKeepingHolder::AddTo(&o, "keeper", ks->dir);
  for (const std::string& name : more) KeyKeepingHolder::AddTo(&o, name, ks->dir);
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  ks->stack = std::move(*stack);
  auto keeper = KeyKeepingHolder::Serve(ks->stack.get(), "keeper", ks->dir);
  ASSERT_TRUE(keeper.ok()) << keeper.status();
  ks->keeper = std::move(*keeper);
  for (const std::string& name : more) {
    auto other = KeyKeepingHolder::Serve(ks->stack.get(), name, ks->dir);
    ASSERT_TRUE(other.ok()) << other.status();
    ks->others.push_back(std::move(*other));
  }
}

// The host's DeviceAdmin: a function-level reset of the emulated GPU.
void ResetGpu(const std::string& admin_endpoint) {
  auto stub = v1::DeviceAdmin::NewStub(MakeChannel(admin_endpoint));
  grpc::ClientContext ctx;
  v1::ResetRequest req;
  v1::ResetResponse resp;
  grpc::Status st = stub->Reset(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// Creates and starts the stack's campaign "demo", waits until it is PAUSED
// or COMPLETED, and reads it with its trips into `*report`.
void RunUntilPausedOrCompleted(EmulatedStack* stack, v1::Campaign* report) {
  auto stub = stack->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), stack->CampaignSpec(), "r1", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return e.kind() == v1::CAMPAIGN_STATE &&
           (e.campaign_state() == v1::PAUSED || e.campaign_state() == v1::COMPLETED);
  }));
  v1::GetCampaignRequest g;
  g.set_name("demo");
  g.set_include_trips(true);
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->GetCampaign(&ctx, g, report).ok());
}

// The model learns through the whole system: six holders, two rounds, the demo's
// trainer. No trip reports a loss above the untrained model's, and the
// held-out loss (the orchestrator's own evaluation set) ends clearly below
// the first trip's training loss; both are reported per trip, as the stack's
// holders allow, rounded to their 2 decimals.
TEST(EndToEndTest, SixHoldersTwoRoundsTheHeldOutLossFalls) {
  StackOptions o;
  o.holders = 6;
  o.rounds = 2;
  o.buffer_bytes = 16u << 20;  // one window per holder and round
  o.chunk_bytes = 2u << 20;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  ASSERT_EQ(report->trips_size(), 12);
  EXPECT_EQ(report->terms().min_windows_per_loss(), 1u);
  EXPECT_EQ(report->terms().loss_decimals(), 2u);
  const double untrained = std::log(512.0);
  for (const auto& t : report->trips()) {
    std::printf("trip %llu %s round %u: loss %.2f held-out %.2f\n",
                static_cast<unsigned long long>(t.id()), t.holder().c_str(), t.round(), t.loss(),
                t.eval_loss());
    EXPECT_EQ(t.outcome(), "ok") << t.error();
    ASSERT_TRUE(t.has_loss()) << "trip " << t.id();
    ASSERT_TRUE(t.has_eval_loss()) << "trip " << t.id();
    EXPECT_LE(t.loss(), untrained) << "trip " << t.id();
    EXPECT_LE(t.eval_loss(), untrained) << "trip " << t.id();
    EXPECT_EQ(t.loss(), std::round(t.loss() * 100) / 100) << "rounded to 2 decimals";
  }
  const double first = report->trips(0).loss();
  const double last_eval = report->trips(11).eval_loss();
  EXPECT_LT(last_eval, first - 0.4);
  EXPECT_TRUE(report->has_eval_loss());
  EXPECT_EQ(report->last_eval_loss(), last_eval);
}

TEST(EndToEndTest, ThreeHoldersEveryTripVerifiedAndTheLossFalls) {
  StackOptions o;
  o.holders = 3;
  o.log_level = 2;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  ASSERT_EQ(report->trips_size(), 3);
  std::set<uint64_t> sizes, trips;
  for (const auto& t : report->trips()) {
    EXPECT_EQ(t.outcome(), "ok") << t.error();
    EXPECT_TRUE(t.digest_match()) << t.holder();
    EXPECT_TRUE(t.scrub_verified()) << t.holder();
    EXPECT_TRUE(t.rekeyed()) << t.holder();
    EXPECT_TRUE(t.has_loss()) << t.holder();
    // What was verified of the holder's TD is recorded with the trip.
    EXPECT_EQ(t.attestation().format(), "dev-attester-v1") << t.holder();
    EXPECT_EQ(t.attestation().mrtd().size(), 96u) << t.holder();
    EXPECT_EQ(t.attestation().rtmr_size(), 4) << t.holder();
    EXPECT_GT(t.attestation().verified_unix_ms(), 0) << t.holder();
    EXPECT_EQ(t.step(), v1::DONE);
    EXPECT_GT(t.bytes(), 0u);
    sizes.insert(t.bytes());
    trips.insert(t.id());
  }
  EXPECT_EQ(sizes.size(), 3u) << "datasets must differ in size";
  EXPECT_EQ(trips.size(), 3u) << "trip ids are unique";
  // And on each holder's status, as of its latest trip.
  ASSERT_EQ(report->holders_size(), 3);
  for (const auto& h : report->holders()) {
    EXPECT_EQ(h.attestation().format(), "dev-attester-v1") << h.name();
    EXPECT_EQ(h.attestation().mrtd().size(), 96u) << h.name();
  }
  // The model learns the holders' shared language as the GPU travels.
  EXPECT_LT(report->trips(2).loss(), report->trips(0).loss());
  EXPECT_LT(report->trips(0).loss(), 6.0) << "an untrained model scores ln(512) = 6.24";
  EXPECT_EQ(report->trips_ok(), 3u);
  EXPECT_EQ(report->bytes_provisioned(), report->bytes_total());
  // The MUX audited every move: out and back for each trip.
  std::string audit = ReadAll((*stack)->dir() + "/logs/mux-audit.jsonl");
  for (const auto& h : (*stack)->holder_names()) {
    EXPECT_NE(audit.find("\"to\":\"td-" + h + "\""), std::string::npos) << h;
  }
  // Each agent kept one bounce ring between its trips (one chunk size here)
  // and removed it when it stopped.
  const std::string shm = (*stack)->dir() + "/shm";
  auto rings = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(shm)) {
      if (e.path().filename().string().rfind("gputravel-bounce-", 0) == 0) ++n;
    }
    return n;
  };
  EXPECT_EQ(rings(), (*stack)->holder_names().size());
  (*stack)->Stop();
  EXPECT_EQ(rings(), 0u) << "a stopped agent leaves no bounce ring in " << shm;
}

TEST(EndToEndTest, NetworkLinksOverTcpLoopbackAndARestartedMuxIsFoundAgain) {
  StackOptions o;
  o.holders = 2;
  o.rounds = 2;
  o.tcp_loopback = true;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  // Every network link is TCP on loopback, on a port the kernel chose; the
  // device sockets stay Unix sockets (the PCIe routing).
  for (const std::string& e : {(*stack)->mux_endpoint(), (*stack)->orchestrator_endpoint()}) {
    EXPECT_EQ(e.rfind("127.0.0.1:", 0), 0u) << e;
    EXPECT_NE(e, "127.0.0.1:0");
  }
  nlohmann::json spec = (*stack)->CampaignSpec();
  for (const auto& h : spec["holders"]) {
    const std::string e = h["endpoint"];
    EXPECT_EQ(e.rfind("127.0.0.1:", 0), 0u) << e;
    EXPECT_NE(e, "127.0.0.1:0");
  }
  EXPECT_EQ((*stack)->device_socket("orchestrator").rfind("unix:", 0), 0u);
  // A MUX restarted between campaigns (after the orchestrator's first
  // contact with the idle GPU) listens where the orchestrator looks.
  WaitForGpuContact((*stack)->OperatorClient().get());
  const std::string mux = (*stack)->mux_endpoint();
  Subprocess* p = (*stack)->process("mux");
  ASSERT_NE(p, nullptr);
  p->Terminate();
  ASSERT_TRUE((*stack)->Restart("mux").ok());
  EXPECT_EQ((*stack)->mux_endpoint(), mux);
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  ASSERT_EQ(report->trips_size(), 4);
  for (const auto& t : report->trips()) {
    EXPECT_EQ(t.outcome(), "ok") << t.error();
    EXPECT_TRUE(t.digest_match());
    EXPECT_TRUE(t.scrub_verified());
    EXPECT_TRUE(t.rekeyed());
  }
}

TEST(EndToEndTest, DatasetLargerThanBufferTakesSeveralTrips) {
  StackOptions o;
  o.holders = 1;
  o.dataset_bytes = {(5u << 20) + 1234};
  o.buffer_bytes = 2u << 20;
  o.chunk_bytes = 512u << 10;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  ASSERT_EQ(report->trips_size(), 3);
  uint64_t total = 0;
  for (const auto& t : report->trips()) {
    EXPECT_EQ(t.window_offset(), total);
    total += t.bytes();
    EXPECT_TRUE(t.digest_match());
  }
  EXPECT_EQ(total, (5u << 20) + 1234);
}

TEST(EndToEndTest, ProportionalScheduleGivesTheBiggerHolderMoreTrips) {
  StackOptions o;
  o.holders = 2;
  o.dataset_bytes = {1u << 20, 3u << 20};
  o.buffer_bytes = 512u << 10;
  o.holder_training_policy["min_window_bytes"] = 4096;  // windows under 1 MiB
  o.chunk_bytes = 256u << 10;
  o.schedule = "proportional";
  o.trainer = false;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  ASSERT_EQ(report->trips_size(), 8);
  std::string order;
  for (const auto& t : report->trips()) {
    order += t.holder().back();
    EXPECT_FALSE(t.has_loss()) << "trainer kind none";
  }
  EXPECT_EQ(order, "abbbabbb");
}

TEST(EndToEndTest, HolderNotRunningRefusesCreateNamingIt) {
  StackOptions o;
  o.holders = 2;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  (*stack)->process("holder-b")->Terminate();
  auto report = (*stack)->RunCampaign();
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("holder-b"), std::string::npos) << report.status();
  auto stub = (*stack)->OperatorClient();
  v1::ListCampaignsResponse list;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->ListCampaigns(&ctx, {}, &list).ok());
  EXPECT_EQ(list.campaigns_size(), 0) << "nothing is recorded before every holder answers";
}

// A holder that stops answering fails its trip within holder_timeout_seconds
// with a clear event. The host can make any holder look so (it relays every
// message), so even under "skip" the holder is not charged: the campaign
// pauses, naming the holder, until an operator resumes or skips it. Skipped,
// the campaign goes on without it and says so when it completes.
TEST(EndToEndTest, HolderThatStopsAnsweringIsNotChargedAndAnOperatorSkipsIt) {
  StackOptions o;
  o.holders = 2;
  o.holder_timeout_seconds = 2;
  o.on_holder_failure = "skip";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  const pid_t b = (*stack)->process("holder-b")->pid();
  ASSERT_EQ(::kill(b, SIGSTOP), 0);  // hangs: the process is there, answers nothing
  auto t0 = std::chrono::steady_clock::now();
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == v1::PAUSED;
  }));
  EXPECT_LT(SecondsSince(t0), 20.0) << "never hangs";
  v1::GetCampaignRequest g;
  g.set_name("demo");
  g.set_include_trips(true);
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->GetCampaign(&ctx, g, &c).ok());
  }
  EXPECT_NE(c.error().find("holder holder-b is not charged"), std::string::npos) << c.error();
  EXPECT_NE(c.error().find("gputravel skip"), std::string::npos) << c.error();
  ASSERT_GE(c.trips_size(), 2);
  EXPECT_EQ(c.trips(1).holder(), "holder-b");
  EXPECT_EQ(c.trips(1).outcome(), "failed");
  for (const auto& h : c.holders()) EXPECT_NE(h.state(), "failed") << h.name();

  // An operator, who knows the holder is gone, takes it out.
  {
    grpc::Status s = Skip(stub.get(), "demo", "holder-b", "its TD was decommissioned");
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_TRUE(Control(stub.get(), "resume", "demo", &c).ok());
  auto report = (*stack)->WaitForFinal("demo", 60);
  ::kill(b, SIGCONT);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  EXPECT_NE(report->error().find("completed WITHOUT holders that failed or were skipped"),
            std::string::npos)
      << report->error();
  EXPECT_NE(report->error().find("holder-b (skipped by "), std::string::npos)
      << report->error();
  for (const auto& h : report->holders()) {
    EXPECT_EQ(h.state(), h.name() == "holder-b" ? "skipped" : "done") << h.name();
  }
  bool saw = false;
  WatchUntil(stub.get(), "demo", [&](const v1::Event& e) {
    if (e.message().find("holder-b") != std::string::npos &&
        e.message().find("its TD was decommissioned") != std::string::npos) {
      saw = true;
    }
    return false;
  });
  EXPECT_TRUE(saw) << "an event names the holder, who skipped it and why";
}

// A holder whose certificate is revoked in the middle of a campaign
// (`gputravel pki revoke` publishes the CRL every daemon names) gets no
// further trip: the orchestrator opens a connection per trip and the TLS
// handshake refuses the revoked certificate before the hand-off leaves. The
// campaign applies its holder-failure policy, and the event says why.
TEST(EndToEndTest, HolderRevokedMidCampaignGetsNoFurtherTripAndIsSkipped) {
  StackOptions o;
  o.holders = 2;
  o.dataset_bytes = {1u << 20, 1u << 20};
  o.buffer_bytes = 256u << 10;  // four trips each, alternating
  o.holder_training_policy["min_window_bytes"] = 4096;
  o.chunk_bytes = 128u << 10;
  o.trainer = false;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  uint64_t revoked_after_trip = 0;
  ASSERT_TRUE(WatchUntil(stub.get(), "demo", [&](const v1::Event& e) {
    if (e.kind() != v1::TRIP_FINISHED || e.holder() != "holder-b") return false;
    // Revoked while holder-a's trip runs: holder-b holds a live connection.
    auto crl = RevokeIdentity((*stack)->tls_dir(), Identity{kRoleHolder, "holder-b"}, 1);
    EXPECT_TRUE(crl.ok()) << crl.status();
    revoked_after_trip = e.trip();
    return true;
  }));
  auto report = (*stack)->WaitForFinal("demo", 120);
  if (!report.ok()) {
    v1::GetCampaignRequest g;
    g.set_name("demo");
    grpc::ClientContext ctx;
    (void)stub->GetCampaign(&ctx, g, &c);
  }
  ASSERT_TRUE(report.ok()) << report.status() << ": " << c.error();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  int ok_after = 0, failed_after = 0, a_trips = 0;
  for (const auto& t : report->trips()) {
    if (t.holder() == "holder-a") {
      ++a_trips;
      EXPECT_EQ(t.outcome(), "ok") << t.id() << " " << t.error();
      continue;
    }
    if (t.id() <= revoked_after_trip) {
      EXPECT_EQ(t.outcome(), "ok") << t.id() << " " << t.error();
      continue;
    }
    if (t.outcome() == "ok") ++ok_after;
    if (t.outcome() == "failed") {
      ++failed_after;
      EXPECT_NE(t.error().find("holder 'holder-b' is revoked"), std::string::npos) << t.error();
    }
  }
  EXPECT_EQ(ok_after, 0) << "a revoked holder got a trip";
  EXPECT_EQ(failed_after, 1) << "one refused trip, then the holder is skipped";
  EXPECT_EQ(a_trips, 4) << "holder-a's windows all travelled";
  for (const auto& h : report->holders()) {
    EXPECT_EQ(h.state(), h.name() == "holder-b" ? "failed" : "done") << h.name();
  }
  bool saw = false;
  WatchUntil(stub.get(), "demo", [&](const v1::Event& e) {
    if (e.kind() == v1::ERROR && e.message().find("holder-b") != std::string::npos &&
        e.message().find("skipped") != std::string::npos &&
        e.message().find("is revoked") != std::string::npos) {
      saw = true;
    }
    return false;
  });
  EXPECT_TRUE(saw) << "an ERROR event names the holder, the policy and the revocation";
}

// Under "pause", a revoked holder pauses the campaign for an operator, who
// sees why.
TEST(EndToEndTest, RevokedHolderUnderPausePolicyPausesSayingItIsRevoked) {
  StackOptions o;
  o.holders = 2;
  o.on_holder_failure = "pause";
  o.trainer = false;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  ASSERT_TRUE(RevokeIdentity((*stack)->tls_dir(), Identity{kRoleHolder, "holder-b"}, 1).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return e.kind() == v1::CAMPAIGN_STATE &&
           (e.campaign_state() == v1::PAUSED || e.campaign_state() == v1::COMPLETED);
  }));
  v1::GetCampaignRequest g;
  g.set_name("demo");
  g.set_include_trips(true);
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->GetCampaign(&ctx, g, &c).ok());
  EXPECT_EQ(c.state(), v1::PAUSED);
  EXPECT_NE(c.error().find("holder-b"), std::string::npos) << c.error();
  EXPECT_NE(c.error().find("is revoked"), std::string::npos) << c.error();
  for (const auto& t : c.trips()) {
    if (t.holder() == "holder-b") {
      EXPECT_NE(t.outcome(), "ok") << t.id();
    }
  }
}

// Under "pause" the campaign stops for an operator, and resumes with the
// holder given another chance.
TEST(EndToEndTest, HolderFailureUnderPausePolicyPausesThenResumeCompletes) {
  StackOptions o;
  o.holders = 2;
  o.holder_timeout_seconds = 2;
  o.on_holder_failure = "pause";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  const pid_t b = (*stack)->process("holder-b")->pid();
  ASSERT_EQ(::kill(b, SIGSTOP), 0);
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == v1::PAUSED;
  }));
  ::kill(b, SIGCONT);
  v1::GetCampaignRequest g;
  g.set_name("demo");
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->GetCampaign(&ctx, g, &c).ok());
  }
  EXPECT_EQ(c.state(), v1::PAUSED);
  EXPECT_NE(c.error().find("holder-b"), std::string::npos) << c.error();
  ASSERT_TRUE(Control(stub.get(), "resume", "demo", &c).ok());
  auto report = (*stack)->WaitForFinal("demo", 60);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  for (const auto& h : report->holders()) EXPECT_EQ(h.state(), "done") << h.name();
}

// Cancel stops a trip in the middle of provisioning, promptly and safely.
TEST(EndToEndTest, CancelStopsProvisioningPromptlyAndSafely) {
  StackOptions o;
  o.holders = 1;
  // Many small chunks on one thread: a provisioning long enough (well over a
  // second) for the cancel to land in the middle of it, even on a fast path.
  o.dataset_bytes = {128u << 20};
  o.buffer_bytes = 128u << 20;
  o.chunk_bytes = 4u << 10;
  o.threads = 1;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(WatchUntil(stub.get(), "demo",
                         [](const v1::Event& e) { return e.kind() == v1::PROGRESS; }));
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(Control(stub.get(), "cancel", "demo", &c).ok());
  auto report = (*stack)->WaitForFinal("demo", 60);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_LT(SecondsSince(t0), 10.0) << "cancel stops work promptly";
  EXPECT_EQ(report->state(), v1::CANCELLED);
  ASSERT_EQ(report->trips_size(), 1);
  const auto& t = report->trips(0);
  EXPECT_EQ(t.outcome(), "aborted");
  EXPECT_EQ(t.step(), v1::ABORTED);
  EXPECT_TRUE(t.rekeyed()) << "the holder's key is dead";
  EXPECT_TRUE(t.scrub_verified()) << "the half-written buffer was scrubbed";
  // A cancelled campaign cannot be restarted or cancelled again.
  grpc::Status again = Control(stub.get(), "cancel", "demo", &c);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  again = Control(stub.get(), "start", "demo", &c);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// Attack (the host undoes a cancel): the operator cancels a campaign while
// its trip is provisioning, and the host has killed the MUX, so the trip
// cannot be made safe at once. RunCampaign then records the trip's failure
// with fail(kCampaignPaused, "... could not be made safe ..."), and
// StateStore::SetCampaignState lets CANCELLING become PAUSED
// (CanMoveCampaign only guards final states): the cancel is forgotten.
// Recovery, which finishes interrupted cancels, only looks for CANCELLING
// campaigns, so once the MUX is back the campaign sits PAUSED, and a
// scheduler's resume trains the holders' data of a campaign an operator
// cancelled. Fix: a CANCELLING campaign may only become CANCELLED (refuse
// CANCELLING -> PAUSED/RUNNING in the store, or keep CANCELLING in the
// engine's failure paths) so recovery completes the cancel.
TEST(EndToEndTest, ACancelIsNotUndoneByATripTheHostKeepsUnsafe) {
  StackOptions o;
  o.holders = 1;
  o.dataset_bytes = {128u << 20};
  o.buffer_bytes = 128u << 20;
  o.chunk_bytes = 4u << 10;
  o.threads = 1;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(WatchUntil(stub.get(), "demo",
                         [](const v1::Event& e) { return e.kind() == v1::PROGRESS; }));
  // The GPU is with the holder; the host kills its MUX, then the operator
  // cancels.
  Subprocess* mux = (*stack)->process("mux");
  ASSERT_NE(mux, nullptr);
  mux->Kill();
  ASSERT_FALSE(mux->Running());
  ASSERT_TRUE(Control(stub.get(), "cancel", "demo", &c).ok());
  // Until the run has given up on the route home and recovery has the trip
  // (its first pass fails while the MUX is down), or the campaign leaves
  // CANCELLING.
  EXPECT_TRUE(WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return (e.kind() == v1::ERROR &&
            e.message().find("recovery could not make the GPU safe yet") != std::string::npos) ||
           (e.kind() == v1::CAMPAIGN_STATE &&
            (e.campaign_state() == v1::PAUSED || e.campaign_state() == v1::CANCELLED));
  })) << "the run never gave the unsafe trip to recovery";
  v1::Campaign now;
  {
    v1::GetCampaignRequest g;
    g.set_name("demo");
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->GetCampaign(&ctx, g, &now).ok());
  }
  EXPECT_NE(now.state(), v1::PAUSED)
      << "the operator's cancel became a pause: a resume runs it again";
  ASSERT_TRUE((*stack)->Restart("mux").ok());
  auto report = (*stack)->WaitForFinal("demo", 120, /*paused_ends_wait=*/true);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::CANCELLED) << report->error();
}

// ATTACK (host, with an operator's ordinary clean-up): a cancel that lands
// while a trip is away reads CANCELLED ("cancelled; GPU safe") as soon as
// the campaign's run stops, although the trip could not be made safe:
// RunCampaign's last step (campaign_engine.cc: CANCELLING -> CANCELLED) does
// not look at the unfinished trip, unlike Cancel() and RecoverTrips. A
// CANCELLED campaign may be deleted, and DeleteCampaign (state_store.cc)
// deletes its trips, the unfinished one with them: recovery, which finds
// trips to make safe only in that table, forgets it. Here the host kills its
// MUX while the GPU is with the holder "keeper" (and keeps the holder's
// device path from working, so none of the keeper's counters is used), the
// operator cancels, sees CANCELLED, deletes the campaign; the MUX comes
// back. Nothing re-keys the GPU: it stays routed to the keeper under the
// session it was handed, and the keeper's kept key still writes into the
// device (P3: a key handed to H is useless after H's trip; P7: a crash of
// any process at any step leaves no holder with a usable key; the
// deleted campaign's buffer is never scrubbed either, P2). Secure behaviour:
// the campaign stays CANCELLING (and cannot be deleted) until recovery has
// made its trip safe.
TEST(EndToEndTest, ACancelledCampaignsUnsafeTripIsNotForgottenByDeletingIt) {
  StackOptions o;
  o.holders = 1;
  KeeperStack ks;
  ASSERT_NO_FATAL_FAILURE(StartKeeperStack(o, &ks));
  EmulatedStack* stack = ks.stack.get();
  const std::string socket =
      stack->device_socket("td-keeper").substr(std::string("unix:").size());
  std::atomic<bool> struck{false};
  ks.keeper->set_before_write([&](const v1::HandoffBinding&) {
    if (struck.exchange(true)) return;
    // The GPU is routed to the keeper: the host kills its MUX and keeps the
    // keeper's device socket, and the operator cancels.
    Subprocess* mux = stack->process("mux");
    ASSERT_NE(mux, nullptr);
    mux->Kill();
    ASSERT_EQ(::rename(socket.c_str(), (socket + ".withheld").c_str()), 0) << socket;
    auto op = stack->OperatorClient();
    v1::Campaign c;
    grpc::Status st = Control(op.get(), "cancel", "demo", &c);
    EXPECT_TRUE(st.ok()) << st.error_message();
  });
  auto stub = stack->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), stack->CampaignSpec(), "r1", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  // Until the route home failed and recovery retries it, or the campaign
  // reads final (a watch ends there).
  (void)WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return (e.kind() == v1::ERROR &&
            e.message().find("could not make the GPU safe yet") != std::string::npos) ||
           (e.kind() == v1::CAMPAIGN_STATE && e.campaign_state() == v1::CANCELLED);
  });
  ASSERT_TRUE(struck.load());
  v1::GetCampaignRequest g;
  g.set_name("demo");
  g.set_include_trips(true);
  v1::Campaign now;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->GetCampaign(&ctx, g, &now).ok());
  }
  EXPECT_EQ(now.state(), v1::CANCELLING)
      << "the campaign reads " << v1::CampaignState_Name(now.state())
      << " while its trip with the keeper is not safe: " << now.error();
  // An operator cleans up what reads final.
  v1::CampaignRef ref;
  ref.set_name("demo");
  v1::DeleteCampaignResponse deleted;
  grpc::Status del;
  {
    grpc::ClientContext ctx;
    del = stub->DeleteCampaign(&ctx, ref, &deleted);
  }
  EXPECT_FALSE(del.ok()) << "a campaign whose trip is not safe was deleted with that trip";

  ASSERT_EQ(::rename((socket + ".withheld").c_str(), socket.c_str()), 0);
  ASSERT_TRUE(stack->Restart("mux").ok());
  if (!del.ok()) {
    // Recovery makes the trip safe once the MUX is back.
    auto report = stack->WaitForFinal("demo", 120, /*paused_ends_wait=*/true);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->state(), v1::CANCELLED) << report->error();
  } else {
    // Nothing is left for recovery to find: a few of its passes (one every
    // 2 s) go by with the MUX back.
    std::this_thread::sleep_for(std::chrono::seconds(6));
  }
  // The keeper's key, handed for a trip that ended, must be dead.
  auto tries = ks.keeper->TryKeptKeys(stack);
  ASSERT_TRUE(tries.ok()) << tries.status();
  EXPECT_EQ(tries->accepted, 0)
      << "the device still accepts the key handed to the keeper for the cancelled trip";
}

// Attack (a scheduler through CheckHolder, against a campaign it does not
// run): every CheckHolder opens an attested channel at the holder's agent
// (OpenChannel) and never claims it. The agent keeps at most
// kMaxPendingChannels (16) unclaimed channels and drops the oldest to make
// room (HolderService::OpenChannel). The engine opens the next trip's
// channel ahead, while the GPU is scrubbed (TripRunner::PrepareChannel):
// CheckHolder calls meanwhile evict it, the next Provision is refused
// "unknown or already used channel", and the campaign pauses (a fault of
// nobody's). Each call also costs the agent a quote. Fix: a preflight must
// not take a slot the engine's trips need (close the checked channel, keep
// preflight channels apart with their own small cap, or rate-limit
// CheckHolder per holder), and/or the engine opens a fresh channel when its
// prepared one is unknown at the agent.
TEST(EndToEndTest, CheckHolderCallsDoNotEvictARunningCampaignsPreparedChannel) {
  StackOptions o;
  o.holders = 1;
  o.dataset_bytes = {8u << 20};
  o.buffer_bytes = 1u << 20;
  o.chunk_bytes = 256u << 10;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  EmulatedStack* st = stack->get();
  auto stub = st->OperatorClient();
  const nlohmann::json h = st->CampaignSpec()["holders"][0];
  v1::CheckHolderRequest check;
  check.set_endpoint(h["endpoint"].get<std::string>());
  check.set_name(h["name"].get<std::string>());
  check.set_domain(h["domain"].get<std::string>());
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), st->CampaignSpec(), "r1", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> checks{0};
  std::vector<std::thread> checkers;
  for (int k = 0; k < 4; ++k) {
    checkers.emplace_back([&] {
      auto mine = st->OperatorClient();
      for (int i = 0; i < 5000 && !stop.load(); ++i) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        v1::HolderCheck out;
        if (mine->CheckHolder(&ctx, check, &out).ok()) ++checks;
      }
    });
  }
  auto report = st->WaitForFinal("demo", 240, /*paused_ends_wait=*/true);
  stop.store(true);
  for (auto& t : checkers) t.join();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(checks.load(), 0);
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
}

TEST(EndToEndTest, CreateIsIdempotentAndValidatesTheSpec) {
  StackOptions o;
  o.holders = 1;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  nlohmann::json spec = (*stack)->CampaignSpec();
  v1::CreateCampaignResponse first, second;
  ASSERT_TRUE(Create(stub.get(), spec, "req-1", &first).ok());
  EXPECT_TRUE(first.created());
  ASSERT_TRUE(Create(stub.get(), spec, "req-1", &second).ok());
  EXPECT_FALSE(second.created()) << "a retried create returns the same campaign";
  EXPECT_EQ(second.campaign().name(), "demo");
  nlohmann::json other = spec;
  other["rounds"] = 2;
  grpc::Status s = Create(stub.get(), other, "req-1", &second);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  s = Create(stub.get(), spec, "req-2", &second);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  nlohmann::json bad = spec;
  bad["name"] = "other";
  bad["holders"][0]["dataset"]["format"] = "csv";
  s = Create(stub.get(), bad, "req-3", &second);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("holders[0].dataset.format"), std::string::npos)
      << s.error_message();
  bad = spec;
  bad["name"] = "other";
  bad["holders"][0]["dataset"]["name"] = "not-what-it-serves";
  s = Create(stub.get(), bad, "req-4", &second);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("holders[0].dataset.name"), std::string::npos)
      << s.error_message();
}

// Two campaigns on one GPU run one after the other, and watching a finished
// campaign ends even while another campaign keeps producing events.
TEST(EndToEndTest, TwoCampaignsShareTheGpuAndWatchesEnd) {
  StackOptions o;
  o.holders = 2;
  o.trainer = false;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  nlohmann::json a = (*stack)->CampaignSpec();
  nlohmann::json b = a;
  b["name"] = "second";
  b["rounds"] = 3;
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), a, "ra", &created).ok());
  ASSERT_TRUE(Create(stub.get(), b, "rb", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(Control(stub.get(), "start", "second", &c).ok());
  auto first = (*stack)->WaitForFinal("demo", 60);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->state(), v1::COMPLETED);
  auto t0 = std::chrono::steady_clock::now();
  bool ended_by_stream = !WatchUntil(stub.get(), "demo", [](const v1::Event&) { return false; });
  EXPECT_TRUE(ended_by_stream);
  EXPECT_LT(SecondsSince(t0), 5.0) << "a finished campaign's watch ends";
  auto second = (*stack)->WaitForFinal("second", 60);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->state(), v1::COMPLETED);
  EXPECT_EQ(second->trips_ok(), 6u);
  // The GPU went to one campaign at a time: trip ids do not interleave.
  EXPECT_LT(first->trips(first->trips_size() - 1).id(), second->trips(0).id());
}

// The standard gRPC health service answers over mTLS (grpc.health.v1).
TEST(EndToEndTest, HealthServiceAnswersServingOverMtls) {
  StackOptions o;
  o.holders = 1;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto channel = MakeSecureChannel((*stack)->orchestrator_endpoint(),
                                   (*stack)->tls({kRoleOperator, "operator"}),
                                   Identity{kRoleOrchestrator, "orchestrator"});
  ASSERT_TRUE(channel.ok()) << channel.status();
  grpc::GenericStub stub(*channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::ByteBuffer request;  // HealthCheckRequest{service: ""} encodes to no bytes
  grpc::Slice empty("", 0);
  request = grpc::ByteBuffer(&empty, 1);
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2)) << "HealthCheckResponse{status: SERVING}";
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// With a CC heartbeat period (4 s, the driver's shortest), the orchestrator
// keeps an idle GPU's session alive; a GPU that missed its heartbeat while no
// orchestrator ran (it needs a reset: DATA_LOSS) is reset through the MUX and
// used again, and nothing of its old memory survives.
TEST(EndToEndTest, HeartbeatKeepsAnIdleGpuAliveAndAMissIsResetThroughTheMux) {
  StackOptions o;
  o.holders = 1;
  o.dataset_bytes = {1u << 20};
  o.heartbeat_period_seconds = 4;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto admin = v1::DeviceAdmin::NewStub(MakeChannel((*stack)->device_admin_endpoint()));
  auto status = [&]() {
    v1::DeviceStatus st;
    grpc::ClientContext ctx;
    EXPECT_TRUE(admin->GetStatus(&ctx, {}, &st).ok());
    return st;
  };
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->state(), v1::COMPLETED) << report->error();
  const uint64_t session = status().session_id();
  ASSERT_GT(session, 0u);
  // Idle for more than two periods, the device's miss rule (it runs on the
  // device's own clock, in its own process): watched all along, the session
  // stays, and the orchestrator's heartbeats are what keeps it (the device
  // counts them arriving).
  const uint64_t beats = status().heartbeats();
  const auto idle_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(9500);
  v1::DeviceStatus st;
  do {
    st = status();
    ASSERT_FALSE(st.needs_reset());
    ASSERT_EQ(st.session_id(), session);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  } while (std::chrono::steady_clock::now() < idle_until);
  EXPECT_GE(status().heartbeats(), beats + 2) << "the session outlived two periods unheard";
  // No orchestrator, no heartbeat: the device misses and needs a reset. The
  // test waits for that state, not for a time (bounded: the miss comes
  // within two periods and a quarter).
  Subprocess* orch = (*stack)->process("orchestrator");
  orch->Kill();
  ASSERT_FALSE(orch->Running());
  const uint64_t last_beats = status().heartbeats();
  const auto miss_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (st = status(); !st.needs_reset() && std::chrono::steady_clock::now() < miss_by;
       st = status()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(st.needs_reset()) << "no heartbeat for 60 s and the device still has its session";
  EXPECT_EQ(st.heartbeats(), last_beats);
  EXPECT_EQ(st.session_id(), 0u);
  EXPECT_EQ(st.resets(), 0u);
  ASSERT_TRUE((*stack)->Restart("orchestrator").ok());
  nlohmann::json again = (*stack)->CampaignSpec();
  again["name"] = "again";
  report = (*stack)->RunCampaign(&again);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  for (const auto& t : report->trips()) EXPECT_EQ(t.outcome(), "ok") << t.error();
  st = status();
  EXPECT_FALSE(st.needs_reset());
  EXPECT_EQ(st.resets(), 1u) << "reset once, through the MUX";
  const std::string audit = ReadAll((*stack)->dir() + "/logs/mux-audit.jsonl");
  EXPECT_NE(audit.find("\"reset\""), std::string::npos) << audit;

  // An orchestrator configured without the heartbeat the device enforces
  // would let every idle GPU lose its session: the campaign does not start,
  // and says why (after making the GPU safe).
  auto cfg = ReadJsonFile((*stack)->dir() + "/orchestrator.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  (*cfg)["gpus"][0]["heartbeat_period_seconds"] = 0;
  ASSERT_TRUE(WriteFile((*stack)->dir() + "/orchestrator.json", cfg->dump(), 0600).ok());
  (*stack)->process("orchestrator")->Terminate();
  ASSERT_TRUE((*stack)->Restart("orchestrator").ok());
  again["name"] = "mismatch";
  report = (*stack)->RunCampaign(&again);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::PAUSED);
  EXPECT_NE(report->error().find("enforces a CC heartbeat every 4 s"), std::string::npos)
      << report->error();
}

// The orchestrator remembers campaigns across a restart and goes on with them.
TEST(EndToEndTest, CampaignsSurviveAnOrchestratorRestart) {
  StackOptions o;
  o.holders = 2;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  {
    auto stub = (*stack)->OperatorClient();
    v1::CreateCampaignResponse created;
    ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
    v1::Campaign c;
    ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
    ASSERT_TRUE(Control(stub.get(), "pause", "demo", &c).ok());
  }
  (*stack)->process("orchestrator")->Terminate();
  ASSERT_TRUE((*stack)->Restart("orchestrator").ok());
  auto stub = (*stack)->OperatorClient();
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "resume", "demo", &c).ok());
  auto report = (*stack)->WaitForFinal("demo", 60);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  EXPECT_EQ(report->trips_ok(), 2u);
}

TEST(EndToEndTest, MissingDatasetStopsStartNamingTheFile) {
  StackOptions o;
  o.holders = 2;
  o.dataset_files = {"/nonexistent/gputravel/train_000.bin"};
  auto stack = EmulatedStack::Start(o);
  ASSERT_FALSE(stack.ok());
  EXPECT_NE(stack.status().message().find("/nonexistent/gputravel/train_000.bin"),
            std::string::npos) << stack.status();
  EXPECT_NE(stack.status().message().find("holder-a"), std::string::npos);
}

TEST(EndToEndTest, MalformedDatasetStopsStartNamingTheProblem) {
  std::string dir = MakeTestDir("gputravel-bad-");
  std::string path = dir + "/bad.bin";
  std::string header(1024, '\0');
  int32_t magic = 20240520, version = 1, count = 1000;  // claims 1000 tokens
  std::memcpy(&header[0], &magic, 4);
  std::memcpy(&header[4], &version, 4);
  std::memcpy(&header[8], &count, 4);
  ASSERT_TRUE(WriteFile(path, header + std::string(10, 'x')).ok());
  StackOptions o;
  o.holders = 1;
  o.dataset_files = {path};
  auto stack = EmulatedStack::Start(o);
  ASSERT_FALSE(stack.ok());
  EXPECT_NE(stack.status().message().find("1000 tokens"), std::string::npos) << stack.status();
  (void)system(("rm -rf " + dir).c_str());
}

// No (key, IV) pair is handed out twice: over every hand-off the keeper got
// and every lane of each, a key's (channel counter, message counter) pairs
// never overlap, and different lanes' keys differ.
void ExpectNoKeyIvRepeats(const std::vector<KeyKeepingHolder::Kept>& kept) {
  std::map<std::string, std::set<std::pair<uint64_t, uint32_t>>> used;
  for (const auto& k : kept) {
    ASSERT_EQ(k.keys.size(), static_cast<size_t>(k.binding.lanes_size()));
    for (int i = 0; i < k.binding.lanes_size(); ++i) {
      const auto& key = k.keys[i];
      const std::string id(reinterpret_cast<const char*>(key.key.data()), key.key.size());
      const v1::H2dLane& l = k.binding.lanes(i);
      for (uint32_t c = 0; c < l.counter_count(); ++c) {
        EXPECT_TRUE(used[id].insert({key.channel_counter, l.first_counter() + c}).second)
            << "trip " << k.binding.trip() << " LCE" << l.copy_engine() << " counter "
            << l.first_counter() + c << " reuses an IV of its key";
      }
    }
  }
}

TEST(EndToEndTest, HolderRetryingWithItsOldKeyAfterRekeyIsRefused) {
  StackOptions o;
  o.holders = 2;
  o.copy_engines = 4;  // every one of the holder's keys must die
  o.chunk_bytes = 256u << 10;  // the keeper's 1 MiB: four chunks, four lanes
  o.log_level = 3;  // most verbose: the logs must still hold no key bytes
  KeeperStack ks;
  ASSERT_NO_FATAL_FAILURE(StartKeeperStack(o, &ks));

  auto report = ks.stack->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  ASSERT_EQ(report->trips_size(), 3);
  auto kept = ks.keeper->kept();
  ASSERT_EQ(kept.size(), 1u) << "the keeper took part in the campaign";

  const int lanes = kept[0].binding.lanes_size();
  EXPECT_GE(lanes, 2) << "the window went through several copy engines";
  ASSERT_EQ(kept[0].keys.size(), static_cast<size_t>(lanes));
  ExpectNoKeyIvRepeats(kept);

  // A malicious host routes the GPU back to the keeper after its trip; each
  // of the kept keys is dead at its own session and useless at the current
  // one.
  auto tries = ks.keeper->TryKeptKeys(ks.stack.get());
  ASSERT_TRUE(tries.ok()) << tries.status();
  EXPECT_EQ(tries->accepted, 0);
  EXPECT_EQ(tries->old_session_refused, 3 * lanes);
  EXPECT_EQ(tries->tag_refused, 3 * lanes);

  // Key material never reaches a log, even at the most verbose level.
  for (const ChannelMaterial& key : kept[0].keys) {
    std::string raw(reinterpret_cast<const char*>(key.key.data()), 32);
    std::string hex = HexEncode(raw);
    for (const auto& log : ks.stack->logs()) {
      std::string text = ReadAll(log.second);
      EXPECT_FALSE(text.empty()) << log.first;
      EXPECT_EQ(text.find(raw), std::string::npos) << log.first;
      EXPECT_EQ(text.find(hex), std::string::npos) << log.first;
      EXPECT_EQ(text.find(hex.substr(0, 16)), std::string::npos) << log.first;
    }
  }
}

// The GPU that comes back from a holder no longer holds the session the
// holder was handed (here the host resets it while it is away, which wipes
// sessions, keys and memory; a substituted GPU looks the same): the read-back
// that doubles as the same-session check fails, the trip fails naming the
// substitution, nothing is trained on it, the GPU is re-keyed and the gone
// buffer counts as clean, and the campaign pauses (not the holder's fault).
TEST(EndToEndTest, GpuResetWhileAwayIsCaughtWhenItComesBack) {
  StackOptions o;
  o.holders = 1;
  KeeperStack ks;
  ASSERT_NO_FATAL_FAILURE(StartKeeperStack(o, &ks));
  const std::string admin = ks.stack->device_admin_endpoint();
  ks.keeper->set_after_write([admin](const v1::HandoffBinding&) { ResetGpu(admin); });

  v1::Campaign report;
  ASSERT_NO_FATAL_FAILURE(RunUntilPausedOrCompleted(ks.stack.get(), &report));
  EXPECT_EQ(report.state(), v1::PAUSED) << report.error();
  EXPECT_NE(report.error().find("GPU substitution detected"), std::string::npos)
      << report.error();
  bool seen = false;
  for (const auto& t : report.trips()) {
    if (t.holder() != "keeper") {
      EXPECT_EQ(t.outcome(), "ok") << t.error();
      continue;
    }
    seen = true;
    EXPECT_EQ(t.outcome(), "failed");
    EXPECT_NE(t.error().find("GPU substitution detected"), std::string::npos) << t.error();
    EXPECT_FALSE(t.digest_match());
    EXPECT_FALSE(t.has_loss()) << "nothing is trained on a GPU that lost our session";
    EXPECT_TRUE(t.rekeyed());
    EXPECT_TRUE(t.scrub_verified());
  }
  EXPECT_TRUE(seen) << "the keeper's trip ran";
}

// ATTACK (host frames a holder with a reset): the host resets the GPU (a
// function-level reset through DeviceAdmin) just as the holder starts to
// write its window. The holder's chunks are then refused (its session is
// gone) and its Provision fails; the GPU comes home without the session the
// orchestrator handed out, and without a session-number jump (a reset uses
// none). GpuResetWhileAwayIsCaughtWhenItComesBack shows that such a GPU is
// caught as "GPU substitution detected" and pauses the campaign; here the
// trip runner checks the holder's failure first and charges the lost session
// to the holder: under on_holder_failure: skip, the holder is removed from
// the campaign and the campaign goes on. Secure behaviour: a GPU that lost
// the orchestrator's session (without a foreign exchange) is never the
// holder's fault, whatever became of the holder's Provision.
TEST(EndToEndTest, GpuResetDuringProvisioningIsNotChargedToTheHolder) {
  StackOptions o;
  o.holders = 1;
  o.on_holder_failure = "skip";
  KeeperStack ks;
  ASSERT_NO_FATAL_FAILURE(StartKeeperStack(o, &ks));
  const std::string admin = ks.stack->device_admin_endpoint();
  std::atomic<int> resets{0};
  ks.keeper->set_before_write([admin, &resets](const v1::HandoffBinding&) {
    if (resets.fetch_add(1) != 0) return;  // the first keeper trip only
    ResetGpu(admin);
  });

  v1::Campaign report;
  ASSERT_NO_FATAL_FAILURE(RunUntilPausedOrCompleted(ks.stack.get(), &report));
  EXPECT_GT(resets.load(), 0) << "the keeper's trip ran";
  EXPECT_EQ(report.state(), v1::PAUSED) << report.error();
  bool seen = false;
  for (const auto& t : report.trips()) {
    if (t.holder() != "keeper" || seen) continue;
    seen = true;
    EXPECT_EQ(t.outcome(), "failed");
    EXPECT_NE(t.error().find("GPU substitution detected"), std::string::npos) << t.error();
    EXPECT_TRUE(t.scrub_verified());
  }
  EXPECT_TRUE(seen) << "the keeper's trip ran";
  for (const auto& h : report.holders()) {
    if (h.name() == "keeper") {
      EXPECT_NE(h.state(), "failed")
          << "the host's reset was charged to the keeper and it was skipped";
    }
  }
}

// P1: while a holder's window is in device memory and the GPU is routed to
// that holder's TD, a key exchange there (by the holder, or by the host that
// routed the GPU) gets a session, but device memory is wiped first: a read
// of the holder's buffer finds nothing. The orchestrator then finds the
// session it handed out gone after a foreign exchange. Either the holder's
// TD or the host made it, so nobody is charged: even under "skip" the
// campaign pauses with the keeper still active, every trip scrubbed. An
// operator who skips the keeper lets it complete without it, the other
// holder's trips writing into a new buffer.
TEST(EndToEndTest, KeyExchangeDuringATripReadsNothingAndChargesNobody) {
  StackOptions o;
  o.holders = 2;
  o.on_holder_failure = "skip";
  KeeperStack ks;
  ASSERT_NO_FATAL_FAILURE(StartKeeperStack(o, &ks));
  auto ca_pem = ReadFile(ks.stack->pki().device_ca_cert);
  ASSERT_TRUE(ca_pem.ok()) << ca_pem.status();
  const std::string ca_der = *CertificatePemToDer(*ca_pem);
  const std::string endpoint = ks.stack->device_socket("td-keeper");
  absl::Mutex mu;
  absl::Status stolen = absl::UnknownError("never tried");
  bool memory_kept = true;
  ks.keeper->set_after_write([&](const v1::HandoffBinding& b) {
    GpuSession thief(MakeChannel(endpoint), ca_der, "");
    absl::Status st = thief.Establish();
    absl::MutexLock l(&mu);
    memory_kept = thief.memory_kept();
    stolen = st.ok() ? thief.Read(b.buffer_id(), 0, 64).status() : st;
  });

  v1::Campaign paused;
  ASSERT_NO_FATAL_FAILURE(RunUntilPausedOrCompleted(ks.stack.get(), &paused));
  {
    absl::MutexLock l(&mu);
    EXPECT_FALSE(memory_kept);
    EXPECT_EQ(stolen.code(), absl::StatusCode::kNotFound) << stolen;
  }
  EXPECT_EQ(paused.state(), v1::PAUSED) << paused.error();
  EXPECT_NE(paused.error().find("holder keeper is not charged"), std::string::npos)
      << paused.error();
  bool seen = false;
  for (const auto& t : paused.trips()) {
    EXPECT_TRUE(t.scrub_verified()) << t.holder();
    EXPECT_TRUE(t.rekeyed()) << t.holder();
    if (t.holder() != "keeper") continue;
    seen = true;
    EXPECT_EQ(t.outcome(), "failed");
    EXPECT_NE(t.error().find("a key exchange the orchestrator did not make"),
              std::string::npos)
        << t.error();
    EXPECT_FALSE(t.has_loss());
  }
  EXPECT_TRUE(seen) << "the keeper's trip ran";
  for (const auto& h : paused.holders()) {
    EXPECT_NE(h.state(), "failed") << h.name();
    if (h.name() == "keeper") EXPECT_EQ(h.state(), "active");
  }

  auto stub = ks.stack->OperatorClient();
  {
    grpc::Status s =
        Skip(stub.get(), "demo", "keeper", "its TD exchanged keys with the GPU during its trip");
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "resume", "demo", &c).ok());
  auto report = ks.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  int ok_trips = 0;
  for (const auto& t : report->trips()) {
    EXPECT_TRUE(t.scrub_verified()) << t.holder();
    if (t.holder() != "keeper") {
      EXPECT_EQ(t.outcome(), "ok") << t.error();
      ok_trips += t.outcome() == "ok";
    }
  }
  EXPECT_EQ(ok_trips, 2);
  for (const auto& h : report->holders()) {
    EXPECT_EQ(h.state(), h.name() == "keeper" ? "skipped" : "done") << h.name();
  }
  EXPECT_NE(report->error().find("completed WITHOUT holders that failed or were skipped"),
            std::string::npos)
      << report->error();
  EXPECT_NE(report->error().find("keeper ("), std::string::npos) << report->error();
}

// P2: the host relays the orchestrator's device socket and answers the
// scrub (every Control from the first trip's re-key on) with a bare
// NOT_FOUND. The trip is not counted safe, the campaign pauses, recovery
// keeps retrying (ERROR events), and no other holder's trip starts; once
// the relay passes calls on again, recovery scrubs with the device's own
// sealed word, the trip is finished, and the resumed campaign completes.
TEST(EndToEndTest, HostAnsweringTheScrubWithNotFoundNeverCountsAsScrubbed) {
  std::string mydir = MakeSocketTestDir("gputravel-relay-");
  DeviceRelay relay;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + mydir + "/relay.sock", grpc::InsecureServerCredentials());
  b.SetMaxReceiveMessageSize(kMaxMessageBytes);
  b.SetMaxSendMessageSize(kMaxMessageBytes);
  b.RegisterService(&relay);
  auto server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  StackOptions o;
  o.holders = 2;
  o.orchestrator_device_endpoint = "unix:" + mydir + "/relay.sock";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  relay.SetUpstream((*stack)->device_socket(EmulatedStack::kOrchestratorDomain));
  auto stub = (*stack)->OperatorClient();
  // Counting exchanges from after the orchestrator's first contact with the
  // idle GPU: exchange 1 starts the campaign; exchange 2 is the first trip's
  // re-key.
  WaitForGpuContact(stub.get());
  relay.AnswerControlWith(grpc::StatusCode::NOT_FOUND, 2);

  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  ASSERT_TRUE(WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return e.kind() == v1::ERROR &&
           e.message().find("recovery could not make the GPU safe yet") != std::string::npos;
  })) << "recovery retries while the scrub cannot be verified";
  EXPECT_GT(relay.faked(), 0);
  v1::GetCampaignRequest g;
  g.set_name("demo");
  g.set_include_trips(true);
  v1::Campaign report;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->GetCampaign(&ctx, g, &report).ok());
  }
  EXPECT_EQ(report.state(), v1::PAUSED) << report.error();
  ASSERT_EQ(report.trips_size(), 1) << "no other holder's trip before a verified scrub";
  EXPECT_TRUE(report.trips(0).outcome().empty()) << "the trip is not finished, not counted safe";
  EXPECT_FALSE(report.trips(0).scrub_verified());

  relay.AnswerControlWith(grpc::StatusCode::OK);
  ASSERT_TRUE(WatchUntil(stub.get(), "demo", [](const v1::Event& e) {
    return e.kind() == v1::RECOVERY;
  }));
  ASSERT_TRUE(Control(stub.get(), "resume", "demo", &c).ok());
  auto final_state = (*stack)->WaitForFinal("demo", 120);
  ASSERT_TRUE(final_state.ok()) << final_state.status();
  EXPECT_EQ(final_state->state(), v1::COMPLETED) << final_state->error();
  // The first trip had trained (its checkpoint committed) before its scrub:
  // it counts once recovery's scrub verified, and its window is not planned
  // again.
  ASSERT_EQ(final_state->trips_size(), 2);
  EXPECT_EQ(final_state->trips(0).outcome(), "ok") << final_state->trips(0).error();
  for (const auto& t : final_state->trips()) EXPECT_TRUE(t.scrub_verified()) << t.id();
  (*stack)->Stop();
  server->Shutdown();
  (void)system(("rm -rf " + mydir).c_str());
}

// Runs a campaign with the keeper aiming outside its window (`aims`, with
// each of its keys while they live) and one honest holder; checks what the
// device answered each aimed chunk (`code`), and that the orchestrator,
// which reads the device's count of such chunks before it trusts a trip,
// refused the keeper's trip as the keeper's fault while the honest holder's
// trips verified.
void ExpectAimedOutsideRefused(const std::vector<KeyKeepingHolder::Aim>& aims,
                               absl::StatusCode code) {
  StackOptions o;
  o.holders = 1;
  o.copy_engines = 2;
  o.chunk_bytes = 256u << 10;  // the keeper's 1 MiB: two lanes of two chunks
  KeeperStack ks;
  ASSERT_NO_FATAL_FAILURE(StartKeeperStack(o, &ks));
  for (auto aim : aims) ks.keeper->AimOutside(aim);
  auto report = ks.stack->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  auto kept = ks.keeper->kept();
  ASSERT_GE(kept.size(), 1u);
  const int lanes = kept[0].binding.lanes_size();
  EXPECT_EQ(lanes, 2) << "each of the keeper's two keys is tried";
  const std::vector<absl::Status> aimed = ks.keeper->aimed();
  ASSERT_EQ(aimed.size(), aims.size() * lanes * kept.size());
  for (const absl::Status& a : aimed) EXPECT_EQ(a.code(), code) << a;
  bool keeper_refused = false;
  for (const auto& t : report->trips()) {
    EXPECT_TRUE(t.scrub_verified()) << t.holder();
    if (t.holder() == "keeper") {
      EXPECT_EQ(t.outcome(), "failed");
      EXPECT_NE(t.error().find("keeper wrote outside its window"), std::string::npos) << t.error();
      EXPECT_NE(t.error().find("refused " + std::to_string(aims.size() * lanes) + " chunk"),
                std::string::npos)
          << t.error();
      keeper_refused = true;
    } else {
      EXPECT_EQ(t.outcome(), "ok") << t.holder() << ": " << t.error();
      EXPECT_TRUE(t.digest_match()) << t.holder();
    }
  }
  EXPECT_TRUE(keeper_refused);
}

// P3 while the keys live: the device takes no chunk past the counter window
// the orchestrator granted each key (before the GPU left), so a holder that
// keeps its keys has no counter left to write with between its report and
// the re-key; what it tries is counted, and the orchestrator refuses its trip.
TEST(EndToEndTest, HolderCannotWritePastItsWindowWhileItsKeysLive) {
  ExpectAimedOutsideRefused({KeyKeepingHolder::Aim::kPastWindow},
                            absl::StatusCode::kOutOfRange);
}

// A holder writes only its own window: with each of its keys it aims at a
// buffer it was not handed and at bytes of its buffer outside its key's
// lane. The device was told each key's buffer, byte range and counters at
// the hand-off (over the sealed control channel): it refuses every such
// chunk, writes nothing, counts them, and the orchestrator refuses the trip.
TEST(EndToEndTest, HolderWritesOnlyItsOwnWindow) {
  ExpectAimedOutsideRefused(
      {KeyKeepingHolder::Aim::kOtherBuffer, KeyKeepingHolder::Aim::kOutsideLane},
      absl::StatusCode::kPermissionDenied);
}

// The provisioning report is the attested holder's word only: the holder
// seals it under the channel that carried its hand-off. Two holders whose
// reports are replaced in the middle (by whoever holds their TLS keys): the
// forger's report has the right numbers and digest (the host can compute
// the digest from the GCM tags in the bounce ring) but is sealed under a key
// of the forger's own; the replayer's second trip carries its genuine sealed
// report of its first trip. Each trip fails as that holder's, with an error
// that names it, the holder is skipped, and the campaign completes without
// it.
TEST(EndToEndTest, ProvisioningReportForgedOrReplayedFromAnotherTripIsRefused) {
  StackOptions o;
  o.holders = 1;
  o.rounds = 2;  // the replayer's 1 MiB dataset takes one trip per round
  o.on_holder_failure = "skip";
  KeeperStack ks;
  ASSERT_NO_FATAL_FAILURE(StartKeeperStack(o, &ks, {"replayer"}));
  ks.keeper->set_report([](const v1::HandoffBinding& b, const v1::ProvisionReport& honest,
                           std::string* sealed) {
    SecretBytes forgers_key = SecretBytes::FromString(RandomString(32));
    auto forged = SealReport(forgers_key, b, honest);
    ASSERT_TRUE(forged.ok()) << forged.status();
    *sealed = *forged;
  });
  absl::Mutex mu;
  std::string first_report;
  ks.others[0]->set_report([&](const v1::HandoffBinding&, const v1::ProvisionReport&,
                              std::string* sealed) {
    absl::MutexLock l(&mu);
    if (first_report.empty()) {
      first_report = *sealed;
    } else {
      *sealed = first_report;
    }
  });
  auto report = ks.stack->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  int forged = 0, replayed = 0, honest = 0;
  for (const auto& t : report->trips()) {
    if (t.holder() == "keeper" || (t.holder() == "replayer" && t.outcome() != "ok")) {
      EXPECT_EQ(t.outcome(), "failed") << t.holder();
      EXPECT_NE(t.error().find("provisioning report of holder '" + t.holder() + "'"),
                std::string::npos)
          << t.error();
      EXPECT_NE(t.error().find("its seal does not verify"), std::string::npos) << t.error();
      EXPECT_TRUE(t.scrub_verified()) << t.holder();
      (t.holder() == "keeper" ? forged : replayed) += 1;
    } else {
      EXPECT_EQ(t.outcome(), "ok") << t.holder() << ": " << t.error();
      honest += t.holder() == "replayer";
    }
  }
  EXPECT_EQ(forged, 1);
  EXPECT_EQ(replayed, 1);
  EXPECT_EQ(honest, 1) << "the replayer's first trip, with its genuine report";
  for (const auto& h : report->holders()) {
    EXPECT_EQ(h.state(), h.name() == "holder-a" ? "done" : "failed") << h.name();
  }
}

// Faults the host causes are not charged to a holder: with the GPU
// unreachable from holder-a's TD (the host withholds the device from it, as
// a route it reports but never made would), the agent's write fails while
// its dataset did not; the attested agent says so, the trip fails as the
// host side's, holder-a is not marked failed and the campaign pauses
// instead of completing without it. Once the device is back, resume
// completes with every holder.
TEST(EndToEndTest, GpuUnreachableFromAHoldersTdIsNotTheHoldersFault) {
  StackOptions o;
  o.holders = 2;
  o.on_holder_failure = "skip";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  const nlohmann::json spec = (*stack)->CampaignSpec();
  const std::string domain = spec["holders"][0]["domain"].get<std::string>();
  const std::string holder = spec["holders"][0]["name"].get<std::string>();
  const std::string socket = (*stack)->device_socket(domain).substr(std::string("unix:").size());
  ASSERT_EQ(::rename(socket.c_str(), (socket + ".withheld").c_str()), 0) << socket;

  v1::Campaign report;
  ASSERT_NO_FATAL_FAILURE(RunUntilPausedOrCompleted(stack->get(), &report));
  EXPECT_EQ(report.state(), v1::PAUSED) << report.error();
  ASSERT_GE(report.trips_size(), 1);
  EXPECT_EQ(report.trips(0).holder(), holder);
  EXPECT_EQ(report.trips(0).outcome(), "failed");
  EXPECT_NE(report.trips(0).error().find("could not be reached from its TD"), std::string::npos)
      << report.trips(0).error();
  for (const auto& h : report.holders()) {
    EXPECT_NE(h.state(), "failed") << h.name() << " was charged for the host's fault";
  }

  ASSERT_EQ(::rename((socket + ".withheld").c_str(), socket.c_str()), 0);
  auto stub = (*stack)->OperatorClient();
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "resume", "demo", &c).ok());
  auto final_state = (*stack)->WaitForFinal("demo", 120);
  ASSERT_TRUE(final_state.ok()) << final_state.status();
  EXPECT_EQ(final_state->state(), v1::COMPLETED) << final_state->error();
  for (const auto& h : final_state->holders()) EXPECT_EQ(h.state(), "done") << h.name();
  (*stack)->Stop();
}

// ATTACK (host): a holder's dataset lies on its TD's disk, the host's. After
// the campaign is created (the orchestrator plans every window on the size
// each agent reported), the host restarts holder-a's TD (it can cut its
// power at any time, e.g. right after an acceptance) and shrinks the dataset
// file meanwhile. The restarted agent refuses holder-a's window as outside
// its dataset. Were that charged to the holder, "skip" would skip holder-a
// and the host would choose whose data trains: nothing the host can do to
// the TD's disk is evidence against the holder, so the campaign pauses.
TEST(EndToEndTest, DatasetTheHostShrinksAcrossARestartDoesNotGetTheHolderSkipped) {
  StackOptions o;
  o.holders = 2;
  o.on_holder_failure = "skip";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto stub = (*stack)->OperatorClient();
  v1::CreateCampaignResponse created;
  ASSERT_TRUE(Create(stub.get(), (*stack)->CampaignSpec(), "r1", &created).ok());
  // The host: holder-a's TD goes down, its dataset keeps 1024 tokens, the
  // TD comes back with the same binary and configuration.
  const std::string holder = "holder-a";
  auto config = ReadJsonFile((*stack)->deployment().config_path(holder));
  ASSERT_TRUE(config.ok()) << config.status();
  const std::string path = (*config)["dataset"]["path"].get<std::string>();
  ASSERT_EQ((*config)["dataset"]["format"].get<std::string>(), "llmc-tokens");
  (*stack)->process(holder)->Kill();
  std::vector<uint16_t> tokens(1024, 7);
  ASSERT_TRUE(WriteLlmcShard(path, tokens.data(), tokens.size()).ok());
  ASSERT_TRUE((*stack)->Restart(holder).ok());

  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "start", "demo", &c).ok());
  auto report = (*stack)->WaitForFinal("demo", 120, /*paused_ends_wait=*/true);
  ASSERT_TRUE(report.ok()) << report.status();
  for (const auto& h : report->holders()) {
    EXPECT_NE(h.state(), "failed") << h.name() << " charged for a dataset the host shrank: "
                                   << h.error();
  }
  EXPECT_EQ(report->error().find("completed WITHOUT holders"), std::string::npos)
      << report->error();
  (*stack)->Stop();
}

// The host holds back the doorbells of holder-a's write (its relay of the
// TD's device socket keeps them from the GPU): the agent's bytes stand still,
// but its progress keeps saying that the device holds its chunks, so once the
// device has held them for holder_timeout_seconds the trip fails as the host
// side's. Under "skip" the holder is not charged: the campaign pauses, and
// once the relay lets doorbells through, resume completes with every holder.
TEST(EndToEndTest, DoorbellsTheHostHoldsBackAreChargedToTheHost) {
  StackOptions o;
  o.holders = 2;
  o.holder_timeout_seconds = 2;
  o.on_holder_failure = "skip";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  const nlohmann::json spec = (*stack)->CampaignSpec();
  const std::string domain = spec["holders"][0]["domain"].get<std::string>();
  const std::string holder = spec["holders"][0]["name"].get<std::string>();
  const std::string socket = (*stack)->device_socket(domain).substr(std::string("unix:").size());
  ASSERT_EQ(::rename(socket.c_str(), (socket + ".device").c_str()), 0) << socket;
  DeviceRelay relay("unix:" + socket + ".device");
  relay.HoldDoorbells(true);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  b.SetMaxReceiveMessageSize(kMaxMessageBytes);
  b.SetMaxSendMessageSize(kMaxMessageBytes);
  b.RegisterService(&relay);
  auto server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);

  v1::Campaign report;
  ASSERT_NO_FATAL_FAILURE(RunUntilPausedOrCompleted(stack->get(), &report));
  EXPECT_GT(relay.held(), 0) << "no doorbell was held back";
  EXPECT_EQ(report.state(), v1::PAUSED) << report.error();
  EXPECT_NE(report.error().find("on the host's side"), std::string::npos) << report.error();
  ASSERT_GE(report.trips_size(), 1);
  EXPECT_EQ(report.trips(0).holder(), holder);
  EXPECT_EQ(report.trips(0).outcome(), "failed");
  EXPECT_NE(report.trips(0).error().find("chunks unacknowledged"), std::string::npos)
      << report.trips(0).error();
  EXPECT_TRUE(report.trips(0).scrub_verified());
  for (const auto& h : report.holders()) {
    EXPECT_EQ(h.state(), "active") << h.name() << " was charged for the host's doorbells";
  }

  relay.HoldDoorbells(false);
  auto stub = (*stack)->OperatorClient();
  v1::Campaign c;
  ASSERT_TRUE(Control(stub.get(), "resume", "demo", &c).ok());
  auto final_state = (*stack)->WaitForFinal("demo", 120);
  ASSERT_TRUE(final_state.ok()) << final_state.status();
  EXPECT_EQ(final_state->state(), v1::COMPLETED) << final_state->error();
  for (const auto& h : final_state->holders()) EXPECT_EQ(h.state(), "done") << h.name();
  (*stack)->Stop();
  server->Shutdown();
}

// The host's relay of a holder's device socket answers the holder's bounce
// ring and doorbell calls with a status of its choosing (every byte of a
// device call's status on that path is the host's).
class ForgingDeviceRelay : public DeviceRelay {
 public:
  ForgingDeviceRelay(std::string upstream, std::string message)
      : DeviceRelay(std::move(upstream)), message_(std::move(message)) {}
  grpc::Status AttachBounce(grpc::ServerContext*, const v1::AttachBounceRequest*,
                            v1::AttachBounceResponse*) override {
    ++forged_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, message_);
  }
  grpc::Status SubmitH2D(grpc::ServerContext*, const v1::SubmitH2DRequest*,
                         v1::SubmitH2DResponse*) override {
    ++forged_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, message_);
  }
  grpc::Status SubmitH2DStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>*) override {
    ++forged_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, message_);
  }
  int forged() const { return forged_.load(); }

 private:
  const std::string message_;
  std::atomic<int> forged_{0};
};

// ATTACK (host): frame an honest holder as revoked. The agent relays the
// device path's own failures (GPU AttachBounce / SubmitH2D) in its status
// message, and the device path is the host's: a relay on holder-a's device
// socket answers with the CRL check's wording (" is revoked (CRL "). A
// failure is charged to the holder as revoked only when this orchestrator's
// own CRL check refused the holder's certificate (RefusedAsRevoked), never
// on a message's text, so holder-a is not charged (threat-model.md, P5: a
// failure is charged to its holder only on evidence the host cannot forge).
TEST(EndToEndTest, HostForgedRevocationWordingInADeviceErrorDoesNotChargeTheHolder) {
  StackOptions o;
  o.holders = 2;
  o.on_holder_failure = "skip";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  const nlohmann::json spec = (*stack)->CampaignSpec();
  const std::string domain = spec["holders"][0]["domain"].get<std::string>();
  const std::string holder = spec["holders"][0]["name"].get<std::string>();
  const std::string socket = (*stack)->device_socket(domain).substr(std::string("unix:").size());
  ASSERT_EQ(::rename(socket.c_str(), (socket + ".device").c_str()), 0) << socket;
  ForgingDeviceRelay relay("unix:" + socket + ".device",
                           std::string("certificate 01 of holder '") + holder + "'" +
                               kRevokedMark + "of the campaign CA, since today)");
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  b.SetMaxReceiveMessageSize(kMaxMessageBytes);
  b.SetMaxSendMessageSize(kMaxMessageBytes);
  b.RegisterService(&relay);
  auto server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);

  v1::Campaign report;
  ASSERT_NO_FATAL_FAILURE(RunUntilPausedOrCompleted(stack->get(), &report));
  EXPECT_GT(relay.forged(), 0) << "the holder never reached the forging relay";
  ASSERT_GE(report.trips_size(), 1);
  EXPECT_EQ(report.trips(0).holder(), holder);
  EXPECT_EQ(report.trips(0).outcome(), "failed");
  // The device path failed: the host's side, nobody's holder charged.
  EXPECT_EQ(report.state(), v1::PAUSED) << report.error();
  for (const auto& h : report.holders()) {
    EXPECT_EQ(h.state(), "active")
        << h.name() << " was charged for the host's forged device error: " << h.error();
  }
  (*stack)->Stop();
  server->Shutdown();
}

}  // namespace
}  // namespace gputravel

namespace gputravel {
namespace {

// ATTACK (host): it answers the holder's doorbells itself. The device's
// acknowledgements (SubmitH2DAck, SubmitH2DResponse) are not authenticated:
// sequence, slot and next counter are all predictable. A relay of the
// holder's device socket that acknowledges every chunk without passing it on
// makes the agent believe the whole window landed: it reports success and
// the read-back does not match its digest. The device says, sealed, how
// many chunks its engines accepted (none): the holder is not charged, the
// campaign pauses (under on_holder_failure: skip, the host would otherwise
// choose whose data trains the model).
class AckForgingRelay : public DeviceRelay {
 public:
  using DeviceRelay::DeviceRelay;
  std::atomic<int> forged{0};

  grpc::Status SubmitH2D(grpc::ServerContext*, const v1::SubmitH2DRequest*,
                         v1::SubmitH2DResponse* resp) override {
    ++forged;  // "decrypted and written": it never reaches the device
    resp->set_next_counter(kFirstMessageCounter + 1);
    resp->set_bounce_id(0);
    return grpc::Status::OK;
  }
  grpc::Status SubmitH2DStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::SubmitH2DAck, v1::SubmitH2DRequest>* stream) override {
    v1::SubmitH2DRequest req;
    uint64_t seq = 0;
    while (stream->Read(&req)) {
      ++forged;
      v1::SubmitH2DAck ack;
      ack.set_sequence(seq);
      ack.set_slot(req.slot());
      ack.set_next_counter(static_cast<uint32_t>(kFirstMessageCounter + seq + 1));
      ++seq;
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }
};

TEST(EndToEndTest, HostForgingDoorbellAcksDoesNotGetTheHolderSkipped) {
  StackOptions o;
  o.holders = 2;
  o.holder_timeout_seconds = 5;
  o.on_holder_failure = "skip";
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  const nlohmann::json spec = (*stack)->CampaignSpec();
  const std::string domain = spec["holders"][0]["domain"].get<std::string>();
  const std::string holder = spec["holders"][0]["name"].get<std::string>();
  const std::string socket = (*stack)->device_socket(domain).substr(std::string("unix:").size());
  ASSERT_EQ(::rename(socket.c_str(), (socket + ".device").c_str()), 0) << socket;
  AckForgingRelay relay("unix:" + socket + ".device");
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  b.SetMaxReceiveMessageSize(kMaxMessageBytes);
  b.SetMaxSendMessageSize(kMaxMessageBytes);
  b.RegisterService(&relay);
  auto server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);

  v1::Campaign report;
  ASSERT_NO_FATAL_FAILURE(RunUntilPausedOrCompleted(stack->get(), &report));
  EXPECT_GT(relay.forged.load(), 0) << "the relay acknowledged no doorbell itself";
  ASSERT_GE(report.trips_size(), 1);
  EXPECT_EQ(report.trips(0).holder(), holder);
  EXPECT_EQ(report.trips(0).outcome(), "failed") << report.trips(0).error();
  EXPECT_TRUE(report.trips(0).scrub_verified());
  EXPECT_EQ(report.state(), v1::PAUSED)
      << "the host's forged acks made the campaign go on without " << holder << ": "
      << report.error();
  for (const auto& h : report.holders()) {
    EXPECT_NE(h.state(), "failed")
        << h.name() << " was charged (" << h.error() << ") for chunks the host kept from the GPU";
  }
  (*stack)->Stop();
  server->Shutdown();
}

}  // namespace
}  // namespace gputravel
