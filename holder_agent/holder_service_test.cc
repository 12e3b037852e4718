// The holder agent's own checks of a hand-off (P5, P6), through its gRPC API
// with mTLS as the orchestrator calls it, into an emulated GPU: the test
// plays an orchestrator that is attested and holds the GPU session, and sends
// hand-offs a faithful orchestrator never would. Each refusal is checked by
// its code and message, and by what it did NOT do: no bytes in the device
// buffer, no counter of the channel used, the channel consumed.
#include "holder_agent/holder_service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "auth/identity.h"
#include "auth/test_server.h"
#include "auth/tls_config.h"
#include "device/emulated_gpu_fixture.h"
#include "gtest/gtest.h"
#include "holder_agent/dataset.h"
#include "holder_agent/holder_metrics.h"
#include "holder_agent/trip_freshness.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/handoff.h"
#include "keyxfer/report_seal.h"
#include "keyxfer/x509.h"
#include "metrics/counted_verifier.h"
#include "metrics/metrics_registry.h"
#include "metrics/metrics_scrape.h"
#include "proto/holder.grpc.pb.h"
#include "util/files.h"

namespace gputravel {
namespace {

const Identity kOrch{kRoleOrchestrator, "orchestrator"};
const Identity kHolderA{kRoleHolder, "holder-a"};
const std::string kOrchMrtd(48, 'O');
const std::string kHolderMrtd(48, 'H');
constexpr uint64_t kWindow = 4096;     // one window = half the device buffer
constexpr uint32_t kChunk = 2048;      // two chunks (two counters) per window
constexpr uint32_t kChunksPerWindow = kWindow / kChunk;

// What the orchestrator has once a channel to the agent is attested both ways.
struct Channel {
  std::string id;
  AttestedChannel keys;
  Evidence orchestrator_evidence;
};

class HolderServiceTest : public testing_fixture::EmulatedGpuFixture {
 protected:
  void SetUp() override {
    Start(device_options_);
    Serve();  // the device as the holder's TD sees it: dir_/holder.sock
    // Development attestation: one root, one attestation key per TD.
    auto root = *EcKey::Generate(Curve::kP256);
    root_der_ = *IssueCertificate(root, "dev root", root, "", true, 1);
    orch_attester_ = MakeAttester(root, "orchestrator", kOrchMrtd);
    holder_attester_ = MakeAttester(root, "holder-a", kHolderMrtd);
    DevPolicy orch_policy;  // what the holder accepts as an orchestrator
    orch_policy.allowed_mrtd = {kOrchMrtd};
    holder_verifier_ = std::make_unique<DevVerifier>(root_der_, orch_policy);
    DevPolicy holder_policy;  // what the orchestrator accepts as holder-a
    holder_policy.allowed_mrtd = {kHolderMrtd};
    orch_verifier_ = std::make_unique<DevVerifier>(root_der_, holder_policy);
    // Intruder: attested by the same root, but not the orchestrator's binary.
    rogue_attester_ = MakeAttester(root, "orchestrator", std::string(48, 'R'));

    // The holder's dataset: 16 KiB of a pattern, so every window differs.
    dataset_.resize(4 * kWindow);
    for (size_t i = 0; i < dataset_.size(); ++i) dataset_[i] = static_cast<char>(i * 131 + 7);
    ASSERT_TRUE(WriteFile(dir_ + "/data.raw", dataset_).ok());

    // The agent, served with mTLS as the holder-a identity.
    ASSERT_TRUE(MakeTestPki(pki_.path(), {kOrch, kHolderA}).ok());
    ASSERT_NO_FATAL_FAILURE(StartAgent());
  }
  // Serves a new agent (its freshness record read from the file the
  // previous one wrote, as a restarted daemon reads it).
  void StartAgent() {
    auto ds = Dataset::Open(dir_ + "/data.raw", "raw");
    ASSERT_TRUE(ds.ok()) << ds.status();
    auto freshness = TripFreshness::Open(pki_.path() + "/freshness.json");
    ASSERT_TRUE(freshness.ok()) << freshness.status();
    HolderOptions o;
    o.name = "holder-a";
    o.dataset_name = "pattern";
    o.domain = "holder-a-td";
    o.orchestrator_names = {kOrch.name};
    o.device_endpoint = "unix:" + dir_ + "/holder.sock";
    o.writer.bounce_dir = dir_ + bounce_subdir_;  // where the device maps rings
    o.clock = [skipped = clock_skipped_] {
      return std::chrono::steady_clock::now() + std::chrono::nanoseconds(skipped->load());
    };
    o.training_policy = Policy();
    o.freshness = std::move(*freshness);
    o.metrics = metrics_;
    Verifier* verifier = agent_verifier_ != nullptr ? agent_verifier_ : holder_verifier_.get();
    auto service = std::make_unique<HolderService>(o, std::move(*ds), holder_attester_.get(),
                                                   verifier);
    agent_ = service.get();
    auto creds = MakeServerCredentials(TestFiles(pki_.path(), kHolderA));
    ASSERT_TRUE(creds.ok()) << creds.status();
    auto server = StartServer("unix:" + pki_.path() + "/agent.sock", *creds, std::move(service));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto ch = MakeSecureChannel(server_->endpoint, TestFiles(pki_.path(), kOrch), kHolderA);
    ASSERT_TRUE(ch.ok()) << ch.status();
    stub_ = v1::HolderAgent::NewStub(*ch);
  }
  // Stops the agent as the daemon stops.
  void StopAgent() {
    if (server_ != nullptr) {
      server_->server->Shutdown();
      agent_->RemoveBounceRing();  // as the daemon does after shutdown
      server_.reset();             // (destroys the agent)
    }
  }
  void TearDown() override {
    StopAgent();
    if (!dir_.empty()) unlink((dir_ + "/data.raw").c_str());
    EmulatedGpuFixture::TearDown();
  }

  std::unique_ptr<DevAttester> MakeAttester(const EcKey& root, const std::string& domain,
                                            const std::string& mrtd) {
    auto k = *EcKey::Generate(Curve::kP256);
    auto cert = *IssueCertificate(k, domain, root, root_der_, false, 1);
    return *DevAttester::Create(domain, std::move(k), cert, mrtd);
  }

  // Opens an attested channel as the orchestrator does, attesting with `as`.
  Channel Open(Attester* as = nullptr) {
    auto init = ChannelInitiator::Create();
    EXPECT_TRUE(init.ok()) << init.status();
    v1::OpenChannelRequest req;
    req.set_orchestrator_public_key(init->public_key());
    req.set_orchestrator_nonce(init->nonce());
    v1::OpenChannelResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
    grpc::Status s = stub_->OpenChannel(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    Channel c;
    c.id = resp.channel_id();
    auto done = init->Complete(resp.holder_public_key(), resp.holder_nonce(), resp.evidence(),
                               *orch_verifier_, as != nullptr ? *as : *orch_attester_,
                               &c.orchestrator_evidence);
    EXPECT_TRUE(done.ok()) << done.status();
    if (done.ok()) c.keys = std::move(*done);
    return c;
  }

  // The binding a faithful orchestrator would send for `trip` of `campaign`,
  // writing dataset window `window` (0..3) into the first half of the buffer
  // at the channel's next counters.
  v1::HandoffBinding Binding(const std::string& campaign, uint64_t trip, uint64_t window) {
    v1::HandoffBinding b;
    b.set_campaign(campaign);
    b.set_trip(trip);
    b.set_gpu_serial("EMU-1");
    b.set_gpu_session(session_);
    b.set_holder("holder-a");
    b.set_buffer_id(buffer_);
    b.set_window_offset(window * kWindow);
    b.set_window_length(kWindow);
    b.set_chunk_size(kChunk);
    v1::H2dLane* lane = b.add_lanes();
    lane->set_copy_engine(0);
    lane->set_length(kWindow);
    lane->set_first_counter(next_counter_);
    lane->set_counter_count(kChunksPerWindow);
    *b.mutable_terms() = Terms();
    return b;
  }

  // The agent's training policy: the default, with windows as short as the
  // test's.
  static v1::TrainingPolicy Policy() {
    v1::TrainingPolicy p = DefaultTrainingPolicy();
    p.set_min_window_bytes(kWindow);
    return p;
  }
  // Terms a faithful orchestrator derives from a spec inside that policy.
  static v1::TrainingTerms Terms() {
    v1::TrainingTerms t;
    t.set_trainer_kind("next-token");
    t.set_vocab(512);
    t.set_dim(32);
    t.set_learning_rate(0.05);
    t.set_batch_tokens(65536);
    t.set_seed(1);
    return Strictest(t, {Policy()});
  }

  // LCE0's H2D key, as the one lane of a hand-off.
  std::vector<ChannelMaterial> LceKeys() {
    std::vector<ChannelMaterial> k;
    k.push_back(keys_.lce_h2d.Clone());
    return k;
  }

  // Sends a hand-off: the LCE H2D key wrapped for `wrapped_for` on `c`, with
  // `sent` as the binding in the request (normally the same).
  grpc::Status Provision(const Channel& c, const v1::HandoffBinding& wrapped_for,
                         const v1::HandoffBinding& sent, v1::ProvisionReport* report) {
    v1::ProvisionRequest req;
    req.set_channel_id(c.id);
    *req.mutable_orchestrator_evidence() = c.orchestrator_evidence;
    *req.mutable_binding() = sent;
    auto wrapped = WrapHandoff(c.keys.handoff_key, wrapped_for, LceKeys());
    EXPECT_TRUE(wrapped.ok()) << wrapped.status();
    req.set_wrapped_handoff(*wrapped);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
    auto reader = stub_->Provision(&ctx, req);
    v1::ProvisionUpdate u;
    std::string sealed;
    while (reader->Read(&u)) {
      if (u.has_sealed_report()) sealed = u.sealed_report();
    }
    grpc::Status s = reader->Finish();
    if (s.ok()) {
      // Sealed under this channel's report key, for this hand-off.
      auto opened = OpenReport(c.keys.report_key, sent, sealed);
      EXPECT_TRUE(opened.ok()) << opened.status();
      if (opened.ok()) *report = *opened;
    }
    if (s.ok()) next_counter_ += static_cast<uint32_t>(report->chunks());
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto fault = trailers.find(kProvisionFaultKey);
    last_fault_ = fault == trailers.end()
                      ? ""
                      : std::string(fault->second.data(), fault->second.size());
    return s;
  }
  grpc::Status Provision(const Channel& c, const v1::HandoffBinding& b,
                         v1::ProvisionReport* report = nullptr) {
    v1::ProvisionReport ignored;
    return Provision(c, b, b, report != nullptr ? report : &ignored);
  }

  std::string Window(uint64_t window) const {
    return dataset_.substr(window * kWindow, kWindow);
  }
  // The first half of the device buffer, where every window is written.
  std::string DeviceWindow() { return Read(0, kWindow); }

  TempDir pki_;
  std::string root_der_, dataset_;
  std::unique_ptr<DevAttester> orch_attester_, holder_attester_, rogue_attester_;
  std::unique_ptr<DevVerifier> holder_verifier_, orch_verifier_;
  HolderService* agent_ = nullptr;
  std::unique_ptr<RunningServer> server_;
  std::unique_ptr<v1::HolderAgent::Stub> stub_;
  uint32_t next_counter_ = 1;  // the LCE H2D channel's next counter on the device
  std::string last_fault_;     // the last Provision's "gputravel-fault" trailer
  EmulatedGpuOptions device_options_;  // a test may set them in its constructor
  // The agent's clock runs this far ahead of the steady clock (AdvanceClock).
  std::shared_ptr<std::atomic<int64_t>> clock_skipped_ = std::make_shared<std::atomic<int64_t>>(0);
  void AdvanceClock(std::chrono::steady_clock::duration d) {
    clock_skipped_->fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }
  std::string bounce_subdir_;  // appended to the fixture's shared memory directory
  // What the next StartAgent counts in, and verifies with (null: none, and
  // holder_verifier_).
  const HolderMetrics* metrics_ = nullptr;
  Verifier* agent_verifier_ = nullptr;
};

void ExpectRefused(const grpc::Status& s, grpc::StatusCode code, const std::string& says) {
  EXPECT_EQ(s.error_code(), code) << s.error_code() << " " << s.error_message();
  EXPECT_NE(s.error_message().find(says), std::string::npos) << s.error_message();
}

TEST_F(HolderServiceTest, FaithfulHandoffIsProvisionedAndItsChannelServesOnce) {
  Channel c = Open();
  v1::ProvisionReport rep;
  v1::HandoffBinding b = Binding("c1", 1, 2);
  ASSERT_TRUE(Provision(c, b, &rep).ok());
  EXPECT_EQ(rep.bytes(), kWindow);
  EXPECT_EQ(rep.chunks(), kChunksPerWindow);
  EXPECT_EQ(DeviceWindow(), Window(2));
  // The same request again (a replay by the host, or a retry): the channel
  // was single-use.
  ExpectRefused(Provision(c, b), grpc::StatusCode::FAILED_PRECONDITION,
                "unknown or already used channel");
  EXPECT_EQ(DeviceWindow(), Window(2));
}

TEST_F(HolderServiceTest, HandoffBoundToAnotherHolderIsRefusedBeforeAnyWrite) {
  const std::string zeros(kWindow, '\0');
  Channel c = Open();
  v1::HandoffBinding b = Binding("c1", 1, 0);
  b.set_holder("holder-b");
  ExpectRefused(Provision(c, b), grpc::StatusCode::PERMISSION_DENIED,
                "hand-off is for holder 'holder-b', this is 'holder-a'");
  EXPECT_EQ(DeviceWindow(), zeros);
  // The refused hand-off took no trip and no counter: the faithful one for
  // the same trip and counters, on a new channel, is accepted.
  ExpectRefused(Provision(c, Binding("c1", 1, 0)), grpc::StatusCode::FAILED_PRECONDITION,
                "already used channel");
  ASSERT_TRUE(Provision(Open(), Binding("c1", 1, 0)).ok());
  EXPECT_EQ(DeviceWindow(), Window(0));
}

TEST_F(HolderServiceTest, TripNotNewerThanTheLastAcceptedIsRefusedPerOrchestratorAndGpu) {
  ASSERT_TRUE(Provision(Open(), Binding("c1", 7, 0)).ok());
  ASSERT_EQ(DeviceWindow(), Window(0));
  // The same trip again and an older trip, each correctly wrapped on its own
  // attested channel: refused, the buffer keeps trip 7's window.
  ExpectRefused(Provision(Open(), Binding("c1", 7, 1)), grpc::StatusCode::PERMISSION_DENIED,
                "hand-off for trip 7 of campaign 'c1' is not fresh (trip 7 from orchestrator "
                "'orchestrator' on GPU 'EMU-1' was already accepted)");
  ExpectRefused(Provision(Open(), Binding("c1", 6, 1)), grpc::StatusCode::PERMISSION_DENIED,
                "hand-off for trip 6 of campaign 'c1' is not fresh");
  EXPECT_EQ(DeviceWindow(), Window(0));
  // A newer trip is accepted. Trip ids come from one counter of the
  // orchestrator, whatever the campaign: an older one of another campaign
  // on the same GPU is refused too.
  ASSERT_TRUE(Provision(Open(), Binding("c1", 8, 1)).ok());
  EXPECT_EQ(DeviceWindow(), Window(1));
  ExpectRefused(Provision(Open(), Binding("c2", 5, 2)), grpc::StatusCode::PERMISSION_DENIED,
                "hand-off for trip 5 of campaign 'c2' is not fresh");
  ASSERT_TRUE(Provision(Open(), Binding("c2", 9, 3)).ok());
  EXPECT_EQ(DeviceWindow(), Window(3));
  // Another GPU's trips are counted apart.
  v1::HandoffBinding other_gpu = Binding("c3", 2, 2);
  other_gpu.set_gpu_serial("EMU-2");
  ASSERT_TRUE(Provision(Open(), other_gpu).ok());
  EXPECT_EQ(DeviceWindow(), Window(2));
}

// Freshness survives a restart of the agent: the trip it accepted is on
// disk before the key is used, and an older hand-off, correctly wrapped
// on a new attested channel to the restarted agent, is refused before its
// key is opened.
TEST_F(HolderServiceTest, OlderHandoffReplayedToARestartedAgentIsRefused) {
  ASSERT_TRUE(Provision(Open(), Binding("c1", 7, 0)).ok());
  ASSERT_EQ(DeviceWindow(), Window(0));
  StopAgent();
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  for (uint64_t trip : {6, 7}) {
    ExpectRefused(Provision(Open(), Binding("c1", trip, 1)), grpc::StatusCode::PERMISSION_DENIED,
                  "hand-off for trip " + std::to_string(trip) +
                      " of campaign 'c1' is not fresh (trip 7 from orchestrator "
                      "'orchestrator' on GPU 'EMU-1' was already accepted)");
  }
  EXPECT_EQ(DeviceWindow(), Window(0));
  ASSERT_TRUE(Provision(Open(), Binding("c1", 8, 1)).ok());
  EXPECT_EQ(DeviceWindow(), Window(1));
}

TEST_F(HolderServiceTest, BindingAlteredInTransitIsRefusedAndTakesNoTrip) {
  // The host changes the window, the buffer or the trip in the request; the
  // key was wrapped for the original binding.
  const v1::HandoffBinding wrapped = Binding("c1", 3, 0);
  for (int field = 0; field < 4; ++field) {
    v1::HandoffBinding sent = wrapped;
    if (field == 0) sent.set_window_offset(2 * kWindow);
    if (field == 1) sent.set_buffer_id(buffer_ + 1);
    if (field == 2) sent.set_trip(4);
    // Other terms, inside the policy: the key was wrapped for others.
    if (field == 3) sent.mutable_terms()->set_vocab(1024);
    v1::ProvisionReport ignored;
    ExpectRefused(Provision(Open(), wrapped, sent, &ignored),
                  grpc::StatusCode::PERMISSION_DENIED,
                  "hand-off refused: it was not wrapped for this channel, campaign, trip");
  }
  EXPECT_EQ(DeviceWindow(), std::string(kWindow, '\0'));
  // None of them counted as trip 3 or 4.
  ASSERT_TRUE(Provision(Open(), Binding("c1", 3, 0)).ok());
  EXPECT_EQ(DeviceWindow(), Window(0));
}

// P1: whatever the orchestrator checked at create, the agent refuses a
// hand-off whose training terms or window its policy does not allow, before
// the key is opened; the trip is not taken (the same trip with allowed terms
// is accepted afterwards).
TEST_F(HolderServiceTest, TermsOrWindowOutsideTheTrainingPolicyAreRefusedBeforeTheKey) {
  struct Case {
    void (*edit)(v1::HandoffBinding*);
    const char* says;
  } cases[] = {
      {[](v1::HandoffBinding* b) { b->mutable_terms()->set_vocab(2); },
       "trainer.vocab is 2; at least 256 allowed"},
      {[](v1::HandoffBinding* b) { b->mutable_terms()->set_batch_tokens(2); },
       "trainer.batch_tokens is 2"},
      {[](v1::HandoffBinding* b) { b->mutable_terms()->set_learning_rate(0.5); },
       "trainer.learning_rate is 0.5"},
      {[](v1::HandoffBinding* b) { b->mutable_terms()->set_trainer_kind("other"); },
       "trainer.kind is \"other\""},
      {[](v1::HandoffBinding* b) { b->mutable_terms()->set_loss_decimals(6); },
       "losses reported with 6 decimals"},
      {[](v1::HandoffBinding* b) { b->mutable_terms()->set_min_windows_per_loss(1); },
       "a loss reported per 1 windows"},
      {[](v1::HandoffBinding* b) { b->mutable_terms()->set_min_window_bytes(32); },
       "minimum window is 32 bytes"},
      {[](v1::HandoffBinding* b) {
         b->set_window_length(32);
         b->mutable_lanes(0)->set_length(32);
         b->mutable_lanes(0)->set_counter_count(1);
       },
       "a window of 32 bytes"},
      {[](v1::HandoffBinding* b) { b->clear_terms(); }, "trainer.kind is \"\""},
  };
  for (const auto& c : cases) {
    v1::HandoffBinding b = Binding("c1", 1, 0);
    c.edit(&b);
    v1::ProvisionReport ignored;
    // Wrapped for exactly these terms: only the policy stands in the way.
    ExpectRefused(Provision(Open(), b, b, &ignored), grpc::StatusCode::PERMISSION_DENIED,
                  c.says);
  }
  EXPECT_EQ(DeviceWindow(), std::string(kWindow, '\0'));
  ASSERT_TRUE(Provision(Open(), Binding("c1", 1, 0)).ok());
  EXPECT_EQ(DeviceWindow(), Window(0));
}

// The agent tells the orchestrator its policy.
TEST_F(HolderServiceTest, GetInfoReportsTheTrainingPolicy) {
  grpc::ClientContext ctx;
  v1::HolderInfo info;
  ASSERT_TRUE(stub_->GetInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.training_policy().SerializeAsString(), Policy().SerializeAsString());
}

TEST_F(HolderServiceTest, OrchestratorOutsideThePolicyGetsNothingWritten) {
  // Another binary, attested by the same root, opens a channel and sends a
  // well-formed hand-off: the agent refuses it before opening the key.
  Channel c = Open(rogue_attester_.get());
  ExpectRefused(Provision(c, Binding("c1", 1, 0)), grpc::StatusCode::PERMISSION_DENIED,
                "orchestrator attestation refused");
  EXPECT_EQ(DeviceWindow(), std::string(kWindow, '\0'));
  // Evidence moved from another channel: bound to that channel's transcript.
  Channel a = Open(), b = Open();
  b.orchestrator_evidence = a.orchestrator_evidence;
  ExpectRefused(Provision(b, Binding("c1", 1, 0)), grpc::StatusCode::PERMISSION_DENIED,
                "orchestrator attestation refused");
  EXPECT_EQ(DeviceWindow(), std::string(kWindow, '\0'));
  // The faithful orchestrator's own channel still works, for trip 1.
  ASSERT_TRUE(Provision(a, Binding("c1", 1, 0)).ok());
  EXPECT_EQ(DeviceWindow(), Window(0));
}

// With metrics on, every Provision is counted once by what it came to, and
// the orchestrator's refused evidence as an attestation failure; nothing
// names a campaign, a trip or the dataset.
TEST_F(HolderServiceTest, MetricsCountProvisionOutcomesAndRefusedEvidence) {
  MetricsRegistry registry;
  HolderMetrics metrics(&registry);
  CountedVerifier counted(holder_verifier_.get(), &registry);
  StopAgent();
  metrics_ = &metrics;
  agent_verifier_ = &counted;
  ASSERT_NO_FATAL_FAILURE(StartAgent());

  ASSERT_TRUE(Provision(Open(), Binding("c1", 1, 0)).ok());
  ASSERT_TRUE(Provision(Open(), Binding("c1", 2, 1)).ok());
  v1::HandoffBinding other = Binding("c1", 3, 0);
  other.set_holder("holder-b");
  EXPECT_FALSE(Provision(Open(), other).ok());                              // refused
  EXPECT_FALSE(Provision(Open(rogue_attester_.get()), Binding("c1", 3, 0)).ok());  // refused
  // Accepted, then the dataset cannot be read (the host's disk): failed.
  ASSERT_EQ(truncate((dir_ + "/data.raw").c_str(), kWindow), 0);
  EXPECT_FALSE(Provision(Open(), Binding("c1", 4, 3)).ok());

  auto s = ParseMetricsText(registry.Text());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->at("gputravel_holder_provisions_total{outcome=\"ok\"}"), 2);
  EXPECT_EQ(s->at("gputravel_holder_provisions_total{outcome=\"refused\"}"), 2);
  EXPECT_EQ(s->at("gputravel_holder_provisions_total{outcome=\"failed\"}"), 1);
  EXPECT_EQ(s->at("gputravel_holder_provisioned_bytes_total"), 2 * kWindow);
  EXPECT_EQ(s->at("gputravel_holder_provision_seconds_count"), 2);
  EXPECT_EQ(s->at(kAttestationFailuresMetric), 1);
  for (const char* name : {"c1", "holder-b", "pattern", "data.raw"}) {
    EXPECT_EQ(registry.Text().find(name), std::string::npos) << name;
  }
  StopAgent();  // before the metrics it counts in go
}

// Channel ids are random: dropping the first one in id order would drop any
// of them. The agent keeps kMaxPendingChannels unclaimed channels and makes
// room for a new one by dropping the oldest.
TEST_F(HolderServiceTest, ChannelBeyondTheCapDropsTheOldestUnusedOne) {
  Channel first = Open();
  std::vector<Channel> others;
  for (size_t i = 1; i < kMaxPendingChannels; ++i) others.push_back(Open());
  Channel newest = Open();  // one more than the cap: the first one goes
  ExpectRefused(Provision(first, Binding("c1", 1, 0)), grpc::StatusCode::FAILED_PRECONDITION,
                "unknown or already used channel");
  EXPECT_EQ(DeviceWindow(), std::string(kWindow, '\0'));
  // The one just opened and the next oldest were kept.
  ASSERT_TRUE(Provision(newest, Binding("c1", 1, 1)).ok());
  EXPECT_EQ(DeviceWindow(), Window(1));
  ASSERT_TRUE(Provision(others.front(), Binding("c1", 2, 2)).ok());
  EXPECT_EQ(DeviceWindow(), Window(2));
}

// A channel no Provision claimed within its lifetime is dropped (its secret
// zeroized) when the next one is opened; the new one is served.
// The agent's bounce_dir is not its domain's shared memory: a directory that
// does not exist, or one the device does not map from.
class MisplacedBounceRingTest : public HolderServiceTest {
 protected:
  MisplacedBounceRingTest() { bounce_subdir_ = "/not-there"; }
};
class ForeignBounceDirTest : public HolderServiceTest {
 protected:
  void SetUp() override {
    bounce_subdir_ = "/elsewhere";
    HolderServiceTest::SetUp();
    ASSERT_EQ(mkdir((dir_ + bounce_subdir_).c_str(), 0700), 0);
  }
  void TearDown() override {
    HolderServiceTest::TearDown();
    rmdir((dir_ + bounce_subdir_).c_str());
  }
};

// Bounce-ring errors (the agent's own, and the GPU's about the ring) name
// local paths for the holder's log; the orchestrator, which passes trip
// errors on to operators, gets them without any path.
TEST_F(MisplacedBounceRingTest, RingErrorsReachTheOrchestratorWithoutLocalPaths) {
  grpc::Status s = Provision(Open(), Binding("c1", 1, 0));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("bounce buffer <holder path>"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(s.error_message().find(dir_), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find("/not-there"), std::string::npos) << s.error_message();
}

TEST_F(ForeignBounceDirTest, TheGpusRingErrorsReachTheOrchestratorWithoutLocalPaths) {
  grpc::Status s = Provision(Open(), Binding("c1", 1, 0));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("<holder path>"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find(dir_), std::string::npos) << s.error_message();
}

// The agent's clock moves past kPendingChannelLifetime without the test
// waiting for it.
TEST_F(HolderServiceTest, ChannelUnusedPastItsLifetimeIsDroppedAtTheNextOpen) {
  Channel stale = Open();
  AdvanceClock(kPendingChannelLifetime + std::chrono::seconds(1));
  Channel fresh = Open();
  ExpectRefused(Provision(stale, Binding("c1", 1, 0)), grpc::StatusCode::FAILED_PRECONDITION,
                "unknown or already used channel (an unused one is dropped after 600 s");
  ASSERT_TRUE(Provision(fresh, Binding("c1", 1, 0)).ok());
  EXPECT_EQ(DeviceWindow(), Window(0));
}

// A channel past its lifetime is refused when a Provision claims it, even
// with no OpenChannel in between to sweep it; one just inside it is not.
TEST_F(HolderServiceTest, ChannelPastItsLifetimeIsRefusedWhenClaimed) {
  Channel young = Open();
  AdvanceClock(kPendingChannelLifetime - std::chrono::seconds(5));
  ASSERT_TRUE(Provision(young, Binding("c1", 1, 0)).ok());
  Channel stale = Open();
  AdvanceClock(kPendingChannelLifetime + std::chrono::seconds(1));
  ExpectRefused(Provision(stale, Binding("c1", 2, 1)), grpc::StatusCode::FAILED_PRECONDITION,
                "unknown or already used channel");
  ASSERT_TRUE(Provision(Open(), Binding("c1", 2, 1)).ok());
  EXPECT_EQ(DeviceWindow(), Window(1));
}

// A window the dataset does not hold is refused before the key is opened,
// takes no trip, and the refusal names the dataset, not its path on the
// holder's machine.
TEST_F(HolderServiceTest, WindowOutsideTheDatasetIsRefusedAndTakesNoTrip) {
  const std::string zeros(kWindow, '\0');
  ExpectRefused(Provision(Open(), Binding("c1", 5, 4)), grpc::StatusCode::OUT_OF_RANGE,
                "window [16384, +4096) is outside the dataset 'pattern' (16384 bytes)");
  v1::HandoffBinding overlapping = Binding("c1", 5, 3);
  overlapping.set_window_offset(3 * kWindow + 1);
  grpc::Status s = Provision(Open(), overlapping);
  ExpectRefused(s, grpc::StatusCode::OUT_OF_RANGE, "is outside the dataset 'pattern'");
  EXPECT_EQ(s.error_message().find(dir_), std::string::npos) << s.error_message();
  EXPECT_EQ(DeviceWindow(), zeros);
  // Trip 5 was not taken by the refusals.
  ASSERT_TRUE(Provision(Open(), Binding("c1", 5, 3)).ok());
  EXPECT_EQ(DeviceWindow(), Window(3));
}

// The agent writes through the hand-off's lanes only if they tile its
// window (one engine each, in order, on chunk boundaries, one counter per
// chunk): otherwise a chunk would be written twice or not at all. Refused
// before the keys are opened; the trip is not taken.
TEST_F(HolderServiceTest, LanesThatDoNotTileTheWindowAreRefusedBeforeTheKeys) {
  const std::string zeros(kWindow, '\0');
  const std::vector<std::function<void(v1::HandoffBinding*)>> breaks = {
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_offset(kChunk); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_copy_engine(8); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_counter_count(kChunksPerWindow + 1); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_length(kWindow - kChunk); },
  };
  for (const auto& brk : breaks) {
    v1::HandoffBinding b = Binding("c1", 5, 3);
    brk(&b);
    ExpectRefused(Provision(Open(), b), grpc::StatusCode::INVALID_ARGUMENT,
                  "hand-off lanes refused");
    EXPECT_EQ(DeviceWindow(), zeros);
  }
  ASSERT_TRUE(Provision(Open(), Binding("c1", 5, 3)).ok());
  EXPECT_EQ(DeviceWindow(), Window(3));
}

// An error from the dataset itself names the file in the holder's log; the
// orchestrator gets the dataset's name instead.
TEST_F(HolderServiceTest, DatasetErrorsReachTheOrchestratorWithoutTheLocalPath) {
  ASSERT_EQ(truncate((dir_ + "/data.raw").c_str(), kWindow), 0);
  grpc::Status s = Provision(Open(), Binding("c1", 1, 3));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find("dataset 'pattern' shrank"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(s.error_message().find(dir_), std::string::npos) << s.error_message();
}

// A failed Provision says whose side failed, and only on the agent's own
// evidence: a hand-off for another holder ("holder"); a window outside its
// dataset (whose file is on the host's disk), a replayed or stale hand-off,
// or a channel it does not know, blames nobody (the host can cause those by
// shrinking the file, or delaying or replaying the orchestrator's calls).
TEST_F(HolderServiceTest, FailureSaysWhoseSideFailedOnlyOnEvidence) {
  ExpectRefused(Provision(Open(), Binding("c1", 5, 4)), grpc::StatusCode::OUT_OF_RANGE,
                "outside the dataset");
  EXPECT_EQ(last_fault_, "");
  v1::HandoffBinding other = Binding("c1", 5, 0);
  other.set_holder("holder-z");
  ExpectRefused(Provision(Open(), other), grpc::StatusCode::PERMISSION_DENIED, "holder-z");
  EXPECT_EQ(last_fault_, kProvisionFaultHolder);

  ASSERT_TRUE(Provision(Open(), Binding("c1", 5, 0)).ok());
  EXPECT_EQ(last_fault_, "");
  ExpectRefused(Provision(Open(), Binding("c1", 5, 1)), grpc::StatusCode::PERMISSION_DENIED,
                "is not fresh");
  EXPECT_EQ(last_fault_, "") << "a replayed hand-off is not the holder's failure";
  Channel unknown = Open();
  unknown.id = "0123456789abcdef";
  ExpectRefused(Provision(unknown, Binding("c1", 6, 1)), grpc::StatusCode::FAILED_PRECONDITION,
                "unknown or already used channel");
  EXPECT_EQ(last_fault_, "") << "an expired or unknown channel is not the holder's failure";

  ASSERT_EQ(truncate((dir_ + "/data.raw").c_str(), kWindow), 0);
  EXPECT_FALSE(Provision(Open(), Binding("c1", 7, 3)).ok());
  EXPECT_EQ(last_fault_, "") << "a dataset the host's disk fails blames nobody";
}

// ATTACK (host): it owns the holder TD's disk (its virtual block device) and
// can fail any write to it, such as the record of the accepted trip the
// agent writes before it uses the key. A write the host can fail is no
// evidence against the holder: no "holder" trailer.
TEST_F(HolderServiceTest, ARecordWriteTheHostFailsIsNotTheHoldersFault) {
  // The host, below the TD's file system, makes the record unwritable: here
  // a directory where the record goes (rename onto it fails, as a write
  // error of the virtual disk would).
  const std::string record = pki_.path() + "/freshness.json";
  ASSERT_EQ(::mkdir(record.c_str(), 0700), 0);
  ASSERT_TRUE(WriteFile(record + "/x", "x").ok());
  grpc::Status s = Provision(Open(), Binding("c1", 5, 0));
  EXPECT_FALSE(s.ok()) << "the test's premise: the record could not be written";
  EXPECT_NE(last_fault_, kProvisionFaultHolder)
      << "the holder is charged for a disk write the host failed: " << s.error_message();
  ::unlink((record + "/x").c_str());
  ::rmdir(record.c_str());
}

// ATTACK (host): the dataset lies on the TD's disk, which is the host's (a
// dataset that cannot be read blames nobody). Between two trips the host
// restarts the holder's TD (a power cut, or the crash right after an
// acceptance) and shrinks the dataset file meanwhile. The orchestrator
// planned its windows on the size the agent reported (GetInfo, at create);
// the restarted agent, which only knows the file as it is now, refuses the
// next window as outside its dataset. Charged to the holder, that would be
// evidence against it (under "skip" it would be skipped: the host would
// choose whose data trains). The shrunken file may be the host's doing: it
// charges nobody.
TEST_F(HolderServiceTest, DatasetTheHostShrankAcrossARestartIsNotTheHoldersFault) {
  v1::HolderInfo info;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->GetInfo(&ctx, {}, &info).ok());
  }
  ASSERT_EQ(info.dataset_bytes(), 4 * kWindow) << "the size the orchestrator plans with";
  ASSERT_TRUE(Provision(Open(), Binding("c1", 1, 0)).ok());
  // The host: the TD goes down, the file loses its last three windows, the
  // TD comes back.
  StopAgent();
  ASSERT_EQ(truncate((dir_ + "/data.raw").c_str(), kWindow), 0);
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  // The next trip, a window inside what the agent reported.
  grpc::Status s = Provision(Open(), Binding("c1", 2, 3));
  EXPECT_FALSE(s.ok()) << "the test's premise: the window is gone from the file";
  EXPECT_NE(last_fault_, kProvisionFaultHolder)
      << "the holder is charged for a dataset the host shrank on the TD's disk: "
      << s.error_message();
}

// The device stalls with the first chunk of a trip, and the orchestrator
// gives up on the trip: the agent's write stops at once (not at its
// deadline, minutes later for a large window), so the key goes and the next
// trip is not kept waiting.
class StalledDeviceTest : public HolderServiceTest {
 protected:
  StalledDeviceTest() {
    device_options_.copy_engine_hook_for_test = [this] {
      entered_ = true;
      for (int i = 0; i < 6000 && !release_; ++i) absl::SleepFor(absl::Milliseconds(10));
    };
  }
  void TearDown() override {
    release_ = true;
    HolderServiceTest::TearDown();
  }
  std::atomic<bool> entered_{false}, release_{false};
};

TEST_F(StalledDeviceTest, CancelledProvisionStopsTheWriteAtOnce) {
  Channel c = Open();
  v1::ProvisionRequest req;
  req.set_channel_id(c.id);
  *req.mutable_orchestrator_evidence() = c.orchestrator_evidence;
  *req.mutable_binding() = Binding("c1", 1, 0);
  req.set_wrapped_handoff(*WrapHandoff(c.keys.handoff_key, req.binding(), LceKeys()));
  grpc::ClientContext ctx;
  auto reader = stub_->Provision(&ctx, req);
  for (int i = 0; i < 2000 && !entered_; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(entered_) << "the first chunk never reached the copy engine";
  const uint64_t rings = gpu_->Status().bounce_buffers();
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The next trip gets through to the device while the first chunk is still
  // held there: its ring is attached, so the agent is no longer writing the
  // first. (Without the cancel reaching the write, the next trip would wait
  // for the first's deadline, 30 s.)
  Channel next = Open();
  std::thread second([&] {
    v1::ProvisionReport ignored;
    (void)Provision(next, Binding("c1", 2, 1), Binding("c1", 2, 1), &ignored);
  });
  bool through = false;
  for (int i = 0; i < 1000 && !through; ++i) {  // 10 s
    absl::SleepFor(absl::Milliseconds(10));
    through = gpu_->Status().bounce_buffers() > rings;
  }
  release_ = true;
  second.join();
  EXPECT_TRUE(through) << "the second trip never reached the device";
}

// While the device holds a chunk, the agent's bytes stand still; its
// progress keeps coming and says for how long the device has held it, so
// the orchestrator can charge a stalled device to the host's side rather
// than cut off the holder as if it had stopped.
TEST_F(StalledDeviceTest, ProgressSaysHowLongTheDeviceHasHeldAChunk) {
  Channel c = Open();
  v1::ProvisionRequest req;
  req.set_channel_id(c.id);
  *req.mutable_orchestrator_evidence() = c.orchestrator_evidence;
  *req.mutable_binding() = Binding("c1", 1, 0);
  req.set_wrapped_handoff(*WrapHandoff(c.keys.handoff_key, req.binding(), LceKeys()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = stub_->Provision(&ctx, req);
  v1::ProvisionUpdate u;
  double longest = 0;
  int waits = 0;
  while (longest < 1.0 && reader->Read(&u)) {
    if (!u.has_progress() || u.progress().device_wait_seconds() == 0) continue;
    EXPECT_GE(u.progress().device_wait_seconds(), longest) << "the wait only grows";
    longest = u.progress().device_wait_seconds();
    ++waits;
  }
  EXPECT_TRUE(entered_);
  EXPECT_GE(longest, 1.0) << "the agent stopped saying that the device holds its chunk";
  EXPECT_GE(waits, 2);
  release_ = true;
  // Released, the device acknowledges and the write completes.
  bool reported = false;
  while (reader->Read(&u)) reported = reported || !u.sealed_report().empty();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(reported);
}

}  // namespace
}  // namespace gputravel
