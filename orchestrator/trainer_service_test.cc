// The Trainer service over real gRPC: mTLS on a Unix socket in a temporary
// directory, the role gate of the daemon, and a C++ trainer using the
// generated stub. The campaign engine's side is played by a thread per
// campaign that offers windows to the campaign's RemoteTrainer and commits
// reports into an in-memory record (what the engine does with the state
// store, orchestrator/campaign_engine.cc).

#include "orchestrator/trainer_service.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "auth/identity.h"
#include "auth/role_gate.h"
#include "auth/test_server.h"
#include "auth/tls_config.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "orchestrator/trainer_registry.h"
#include "orchestrator/trip_steps.h"
#include "proto/trainer.grpc.pb.h"
#include "trainer/remote_trainer.h"
#include "util/files.h"
#include "util/server_limits.h"

namespace gputravel {
namespace {

const Identity kOrch{kRoleOrchestrator, "orch"};
const Identity kTrainer1{kRoleTrainer, "t1"};
const Identity kTrainer2{kRoleTrainer, "t2"};
const Identity kHolder{kRoleHolder, "h1"};
const Identity kOperator{kRoleOperator, "op"};
constexpr size_t kBatchTokens = 64;

// A window of `n` tokens whose token i is (trip * 1000 + i) mod 65536.
TrainingWindow MakeWindow(const std::string& campaign, uint64_t trip, uint64_t n) {
  TrainingWindow w;
  w.campaign = campaign;
  w.trip = trip;
  w.holder = "h1";
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t t = static_cast<uint16_t>(trip * 1000 + i);
    w.tokens.push_back(static_cast<char>(t & 0xff));
    w.tokens.push_back(static_cast<char>(t >> 8));
  }
  return w;
}

std::string Digest(uint64_t trip, char salt = 'c') {
  std::string d(32, salt);
  d[0] = static_cast<char>(trip);
  return d;
}

// The engine's side of one campaign: its RemoteTrainer, registered, and
// the windows committed (what the state store would hold).
struct Campaign {
  std::string name;
  std::shared_ptr<RemoteTrainer> trainer;
  absl::Mutex mu;
  std::map<uint64_t, ResumePoint> commits;  // by trip
  std::map<uint64_t, int> commit_count;
  std::map<uint64_t, uint64_t> window_tokens;  // WindowResult.tokens by trip
  std::vector<std::string> events;

  RemoteTrainer::CommitFn Commit() {
    return [this](const WindowResult& r, const ResumePoint& after) {
      absl::MutexLock l(&mu);
      commits[after.committed_trip] = after;
      ++commit_count[after.committed_trip];
      window_tokens[after.committed_trip] = r.tokens;
      return absl::OkStatus();
    };
  }
  RemoteTrainer::EventFn Event() {
    return [this](const std::string& m) {
      absl::MutexLock l(&mu);
      events.push_back(m);
    };
  }
  int CommitCount(uint64_t trip) {
    absl::MutexLock l(&mu);
    return commit_count[trip];
  }
};

// What a test trainer saw and did.
struct TrainerRun {
  grpc::Status end;
  ResumePoint resume;
  uint64_t batch_tokens = 0;
  std::vector<uint64_t> reported;          // trips, in order
  std::map<uint64_t, uint64_t> tokens;     // window tokens received, by trip
  std::map<uint64_t, std::string> bytes;   // the window's bytes, overlap once
  std::vector<uint32_t> indices;           // batch indices, in arrival order
  int batches = 0;
  int batches_without_lease = 0;
  std::vector<grpc::Status> report_status;
};

struct RunOptions {
  int report_windows = 1;  // stop after reporting this many (and the release)
  int cancel_after_batches = -1;  // "killed" after this many batches
  bool answer_release = true;
  // Called when the stream's Resume arrives: the trainer is attached.
  std::function<void()> on_attached;
};
RunOptions Reporting(int windows) {
  RunOptions o;
  o.report_windows = windows;
  return o;
}
RunOptions KilledAfter(int batches) {
  RunOptions o;
  o.cancel_after_batches = batches;
  return o;
}

class TrainerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = tmp_.path() + "/pki";
    ASSERT_TRUE(MakeTestPki(pki_, {kOrch, kTrainer1, kTrainer2, kHolder, kOperator}).ok());
    auto creds = MakeServerCredentials(TestFiles(pki_, kOrch));
    ASSERT_TRUE(creds.ok()) << creds.status();
    InstallRoleGate(creds->get(), TrainerServiceRoles());
    auto service = std::make_unique<TrainerServiceImpl>(
        [this](const std::string& c) { return Lookup(c); }, &registry_);
    service_ = service.get();
    auto server = StartServer("unix:" + tmp_.path() + "/trainer.sock", *creds, std::move(service));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override {
    service_->Shutdown();
    for (auto& [name, c] : campaigns_) {
      if (c->trainer) c->trainer->Close(absl::CancelledError("test over"));
    }
    for (auto& t : producers_) t.join();
    server_.reset();
  }

  absl::StatusOr<TrainerCampaignInfo> Lookup(const std::string& campaign) {
    {
      absl::MutexLock l(&info_mu_);
      ++lookups_[campaign];
      auto it = info_.find(campaign);
      if (it != info_.end()) return it->second;
    }
    if (campaign == "builtin") return TrainerCampaignInfo{"next-token", "", kCampaignRunning, ""};
    auto it = campaigns_.find(campaign);
    if (it == campaigns_.end()) return absl::NotFoundError("campaign '" + campaign + "' not found");
    return TrainerCampaignInfo{"external", campaign == "c2" ? "t2" : "t1", kCampaignRunning, ""};
  }

  Campaign* AddCampaign(const std::string& name, ResumePoint resume = {},
                        absl::Duration release_timeout = absl::Seconds(60)) {
    auto c = std::make_unique<Campaign>();
    c->name = name;
    RemoteTrainer::Options o;
    o.campaign = name;
    o.identity = name == "c2" ? "t2" : "t1";
    o.batch_tokens = kBatchTokens;
    o.vocab = 512;
    o.window_timeout = absl::Seconds(120);
    o.release_timeout = release_timeout;
    Campaign* raw = c.get();
    o.committed = [raw](uint64_t trip) -> absl::StatusOr<std::optional<ResumePoint>> {
      absl::MutexLock l(&raw->mu);
      auto it = raw->commits.find(trip);
      if (it == raw->commits.end()) return std::optional<ResumePoint>();
      return std::optional<ResumePoint>(it->second);
    };
    c->trainer = std::make_shared<RemoteTrainer>(o, resume);
    registry_.Register(name, c->trainer);
    campaigns_[name] = std::move(c);
    return raw;
  }

  // The engine: offers windows (trip, tokens) one after the other.
  void Produce(Campaign* c, std::vector<std::pair<uint64_t, uint64_t>> windows,
               std::vector<absl::Status>* results = nullptr) {
    producers_.emplace_back([c, windows, results] {
      for (const auto& [trip, n] : windows) {
        auto r = c->trainer->TrainWindow(MakeWindow(c->name, trip, n), c->Commit(), c->Event());
        if (results != nullptr) results->push_back(r.status());
        if (!r.ok()) return;
      }
    });
  }

  std::unique_ptr<v1::Trainer::Stub> Stub(const Identity& who) {
    auto ch = MakeSecureChannel(server_->endpoint, TestFiles(pki_, who), kOrch);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return v1::Trainer::NewStub(*ch);
  }

  static v1::WindowReport Report(const std::string& campaign, uint64_t trip, uint64_t tokens,
                                 size_t batches, char salt = 'c') {
    v1::WindowReport r;
    r.set_campaign(campaign);
    r.set_trip(trip);
    r.set_tokens(tokens);
    for (size_t i = 0; i < batches; ++i) r.add_batch_loss(2.0);
    r.set_checkpoint_sha256(Digest(trip, salt));
    return r;
  }

  // A trainer: attaches, trains every window it gets (checking that each
  // batch arrives while it holds the lease), reports it and answers the
  // lease's release.
  TrainerRun Train(v1::Trainer::Stub* stub, const std::string& campaign, RunOptions o = {}) {
    TrainerRun run;
    grpc::ClientContext ctx;
    v1::AttachRequest req;
    req.set_campaign(campaign);
    auto reader = stub->Attach(&ctx, req);
    v1::TrainerMessage m;
    bool lease = false;
    uint64_t lease_id = 0;
    std::map<uint64_t, int> batches_of;
    while (reader->Read(&m)) {
      if (m.has_resume()) {
        run.resume.committed_trip = m.resume().committed_trip();
        run.resume.checkpoint_sha256 = m.resume().checkpoint_sha256();
        run.resume.tokens_committed = m.resume().tokens_committed();
        run.batch_tokens = m.resume().batch_tokens();
        if (o.on_attached) o.on_attached();
      } else if (m.has_lease()) {
        lease_id = m.lease().lease_id();
        lease = !m.lease().release();
        if (m.lease().release()) {
          if (o.answer_release) {
            grpc::ClientContext rc;
            v1::LeaseReleased rel;
            rel.set_campaign(campaign);
            rel.set_lease_id(lease_id);
            v1::LeaseReleasedAck ack;
            EXPECT_TRUE(stub->ReleaseLease(&rc, rel, &ack).ok());
          }
          if (static_cast<int>(run.reported.size()) >= o.report_windows) ctx.TryCancel();
        }
      } else if (m.has_batch()) {
        const v1::Batch& b = m.batch();
        ++run.batches;
        if (!lease) ++run.batches_without_lease;
        run.indices.push_back(b.index());
        const uint64_t n = b.tokens().size() / 2;
        std::string& bytes = run.bytes[b.trip()];
        // Each batch but the first repeats the previous one's last token.
        bytes += batches_of[b.trip()] == 0 ? b.tokens() : b.tokens().substr(2);
        run.tokens[b.trip()] += batches_of[b.trip()] == 0 ? n : n - 1;
        ++batches_of[b.trip()];
        if (o.cancel_after_batches >= 0 && run.batches >= o.cancel_after_batches) {
          ctx.TryCancel();
          continue;
        }
        if (b.last_of_window()) {
          grpc::ClientContext rc;
          v1::WindowCommitted done;
          grpc::Status s = stub->ReportWindow(
              &rc, Report(campaign, b.trip(), run.tokens[b.trip()], batches_of[b.trip()]), &done);
          run.report_status.push_back(s);
          if (s.ok()) run.reported.push_back(b.trip());
        }
      }
    }
    run.end = reader->Finish();
    return run;
  }

  // What Lookup answers for `campaign` from now on (a campaign whose state
  // or spec a test changes while a stream waits), and how often it was asked.
  void SetInfo(const std::string& campaign, TrainerCampaignInfo info) {
    absl::MutexLock l(&info_mu_);
    info_[campaign] = std::move(info);
  }
  int Lookups(const std::string& campaign) {
    absl::MutexLock l(&info_mu_);
    return lookups_[campaign];
  }

  TempDir tmp_;
  std::string pki_;
  absl::Mutex info_mu_;
  std::map<std::string, TrainerCampaignInfo> info_ ABSL_GUARDED_BY(info_mu_);
  std::map<std::string, int> lookups_ ABSL_GUARDED_BY(info_mu_);
  TrainerRegistry registry_;
  TrainerServiceImpl* service_ = nullptr;
  std::unique_ptr<RunningServer> server_;
  std::map<std::string, std::unique_ptr<Campaign>> campaigns_;
  std::vector<std::thread> producers_;
};

std::string ExpectedBytes(uint64_t trip, uint64_t n) { return MakeWindow("x", trip, n).tokens; }

TEST_F(TrainerServiceTest, AttachResumeBatchesAndReportsCommitEveryWindowOnce) {
  Campaign* c = AddCampaign("c1");
  // 300 tokens: 4 batches (the 43-token rest joins the last); 65: 1; 1000: 15.
  Produce(c, {{1, 300}, {2, 65}, {3, 1000}});
  auto stub = Stub(kTrainer1);
  TrainerRun run = Train(stub.get(), "c1", Reporting(3));
  EXPECT_EQ(run.resume.committed_trip, 0u);
  EXPECT_EQ(run.batch_tokens, kBatchTokens);
  EXPECT_EQ(run.reported, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(run.batches_without_lease, 0);
  const std::map<uint64_t, uint64_t> sizes = {{1, 300}, {2, 65}, {3, 1000}};
  for (const auto& [trip, n] : sizes) {
    EXPECT_EQ(run.tokens[trip], n) << "trip " << trip;
    EXPECT_EQ(run.bytes[trip], ExpectedBytes(trip, n)) << "trip " << trip;
    EXPECT_EQ(c->CommitCount(trip), 1) << "trip " << trip;
    absl::MutexLock l(&c->mu);
    EXPECT_EQ(c->window_tokens[trip], n);
  }
  ResumePoint now = c->trainer->resume();
  EXPECT_EQ(now.committed_trip, 3u);
  EXPECT_EQ(now.checkpoint_sha256, Digest(3));
  EXPECT_EQ(now.tokens_committed, 300u + 65u + 1000u);
  // A trainer attaching now is told that point.
  Produce(c, {{4, 100}});
  TrainerRun again = Train(stub.get(), "c1");
  EXPECT_EQ(again.resume.committed_trip, 3u);
  EXPECT_EQ(again.resume.checkpoint_sha256, Digest(3));
  EXPECT_EQ(again.resume.tokens_committed, 1365u);
  EXPECT_EQ(again.reported, (std::vector<uint64_t>{4}));
}

TEST_F(TrainerServiceTest, ATrainerKilledMidWindowGetsTheWindowAgainAndItCommitsOnce) {
  Campaign* c = AddCampaign("c1");
  Produce(c, {{1, 100}, {2, 1000}});
  auto stub = Stub(kTrainer1);
  TrainerRun first = Train(stub.get(), "c1", Reporting(1));
  ASSERT_EQ(first.reported, (std::vector<uint64_t>{1}));
  // Killed after 5 of trip 2's 15 batches: nothing reported.
  TrainerRun killed = Train(stub.get(), "c1", KilledAfter(5));
  EXPECT_EQ(killed.end.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(killed.resume.committed_trip, 1u);
  EXPECT_TRUE(killed.reported.empty());
  EXPECT_EQ(c->CommitCount(2), 0);
  // Restarted: told to resume after trip 1, it gets all of trip 2 again.
  TrainerRun restarted = Train(stub.get(), "c1", Reporting(1));
  EXPECT_EQ(restarted.resume.committed_trip, 1u);
  EXPECT_EQ(restarted.resume.checkpoint_sha256, Digest(1));
  EXPECT_EQ(restarted.resume.tokens_committed, 100u);
  ASSERT_FALSE(restarted.indices.empty());
  EXPECT_EQ(restarted.indices.front(), 0u) << "the window starts again at its first batch";
  EXPECT_EQ(restarted.tokens[2], 1000u);
  EXPECT_EQ(restarted.bytes[2], ExpectedBytes(2, 1000));
  EXPECT_EQ(restarted.reported, (std::vector<uint64_t>{2}));
  EXPECT_EQ(c->CommitCount(2), 1);
  EXPECT_EQ(c->trainer->resume().tokens_committed, 1100u);
}

TEST_F(TrainerServiceTest, ReportsThatDoNotMatchTheWindowAreRefusedAndARetryIsIdempotent) {
  Campaign* c = AddCampaign("c1");
  Produce(c, {{7, 300}});
  auto stub = Stub(kTrainer1);
  grpc::ClientContext ctx;
  v1::AttachRequest req;
  req.set_campaign("c1");
  auto reader = stub->Attach(&ctx, req);
  v1::TrainerMessage m;
  auto report = [&](const v1::WindowReport& r) {
    grpc::ClientContext rc;
    v1::WindowCommitted out;
    return stub->ReportWindow(&rc, r, &out);
  };
  int batches = 0;
  while (reader->Read(&m)) {
    if (!m.has_batch()) continue;
    ++batches;
    if (m.batch().last_of_window()) break;
  }
  ASSERT_EQ(batches, 4);
  grpc::Status wrong_trip = report(Report("c1", 8, 300, 4));
  EXPECT_EQ(wrong_trip.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(wrong_trip.error_message().find("trip 7"), std::string::npos)
      << wrong_trip.error_message();
  EXPECT_EQ(report(Report("c1", 7, 300, 3)).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(report(Report("c1", 7, 299, 4)).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::WindowReport short_digest = Report("c1", 7, 300, 4);
  short_digest.set_checkpoint_sha256("abc");
  EXPECT_EQ(report(short_digest).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(c->CommitCount(7), 0);
  // The right report commits; its retry (a lost answer) is OK; another
  // checkpoint for the same trip is refused.
  EXPECT_TRUE(report(Report("c1", 7, 300, 4)).ok());
  EXPECT_TRUE(report(Report("c1", 7, 300, 4)).ok());
  EXPECT_EQ(report(Report("c1", 7, 300, 4, 'x')).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(c->CommitCount(7), 1);
  EXPECT_EQ(c->trainer->resume().tokens_committed, 300u);
  ctx.TryCancel();
  (void)reader->Finish();
}

TEST_F(TrainerServiceTest, CallersOfAnotherRoleOrAnotherTrainerNameAreRefused) {
  AddCampaign("c1");
  AddCampaign("c2");
  for (const Identity& who : {kHolder, kOperator, kOrch}) {
    auto stub = Stub(who);
    grpc::ClientContext ctx;
    v1::AttachRequest req;
    req.set_campaign("c1");
    v1::TrainerMessage m;
    auto reader = stub->Attach(&ctx, req);
    EXPECT_FALSE(reader->Read(&m));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << DescribeIdentity(who);
    grpc::ClientContext rc;
    v1::WindowCommitted out;
    EXPECT_EQ(stub->ReportWindow(&rc, Report("c1", 1, 100, 1), &out).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << DescribeIdentity(who);
  }
  // Trainer t2 is c2's, not c1's: refused for every method.
  auto t2 = Stub(kTrainer2);
  {
    grpc::ClientContext ctx;
    v1::AttachRequest req;
    req.set_campaign("c1");
    v1::TrainerMessage m;
    auto reader = t2->Attach(&ctx, req);
    EXPECT_FALSE(reader->Read(&m));
    grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(s.error_message().find("trainer 't2'"), std::string::npos) << s.error_message();
  }
  {
    grpc::ClientContext rc;
    v1::WindowCommitted out;
    EXPECT_EQ(t2->ReportWindow(&rc, Report("c1", 1, 100, 1), &out).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    grpc::ClientContext lc;
    v1::LeaseReleased rel;
    rel.set_campaign("c1");
    v1::LeaseReleasedAck ack;
    EXPECT_EQ(t2->ReleaseLease(&lc, rel, &ack).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // Unknown campaign; a campaign with the built-in trainer.
  auto t1 = Stub(kTrainer1);
  for (const auto& [campaign, code] :
       std::vector<std::pair<std::string, grpc::StatusCode>>{
           {"nope", grpc::StatusCode::NOT_FOUND}}) {
    grpc::ClientContext ctx;
    v1::AttachRequest req;
    req.set_campaign(campaign);
    v1::TrainerMessage m;
    auto reader = t1->Attach(&ctx, req);
    EXPECT_FALSE(reader->Read(&m));
    EXPECT_EQ(reader->Finish().error_code(), code) << campaign;
  }
}

TEST_F(TrainerServiceTest, ASecondAttachIsRefusedWhileTheFirstIsOpen) {
  AddCampaign("c1");
  auto stub = Stub(kTrainer1);
  grpc::ClientContext ctx;
  v1::AttachRequest req;
  req.set_campaign("c1");
  auto first = stub->Attach(&ctx, req);
  v1::TrainerMessage m;
  ASSERT_TRUE(first->Read(&m));
  ASSERT_TRUE(m.has_resume());
  grpc::ClientContext ctx2;
  auto second = stub->Attach(&ctx2, req);
  EXPECT_FALSE(second->Read(&m));
  grpc::Status s = second->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("already has an attached trainer"), std::string::npos);
  ctx.TryCancel();
  (void)first->Finish();
}

TEST_F(TrainerServiceTest, NoBatchArrivesWithoutTheLeaseAndAnUnansweredReleaseIsAnEvent) {
  Campaign* c = AddCampaign("c1", {}, absl::Milliseconds(300));
  std::vector<absl::Status> results;
  Produce(c, {{1, 200}, {2, 200}}, &results);
  auto stub = Stub(kTrainer1);
  // This trainer never answers a release: each window's lease is taken back
  // after release_timeout_seconds, with an event naming it.
  RunOptions silent = Reporting(2);
  silent.answer_release = false;
  TrainerRun run = Train(stub.get(), "c1", silent);
  (void)run;
  producers_.back().join();
  producers_.pop_back();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok() && results[1].ok());
  EXPECT_EQ(run.batches_without_lease, 0);
  EXPECT_EQ(run.reported, (std::vector<uint64_t>{1, 2}));
  EXPECT_FALSE(c->trainer->lease_held());
  absl::MutexLock l(&c->mu);
  ASSERT_EQ(c->events.size(), 2u);
  EXPECT_NE(c->events[0].find("trainer 't1'"), std::string::npos) << c->events[0];
  EXPECT_NE(c->events[0].find("did not release device lease 1"), std::string::npos);
}

TEST_F(TrainerServiceTest, ASlowTrainerDoesNotHoldUpAnotherCampaign) {
  Campaign* slow = AddCampaign("c1");
  Campaign* fast = AddCampaign("c2");
  Produce(slow, {{1, 100000}});
  Produce(fast, {{11, 300}, {12, 300}, {13, 300}});
  auto s1 = Stub(kTrainer1);
  // c1's trainer attaches and reads nothing: the stream's flow control
  // holds c1's window; c2 trains all of its windows meanwhile.
  grpc::ClientContext ctx;
  v1::AttachRequest req;
  req.set_campaign("c1");
  auto stalled = s1->Attach(&ctx, req);
  auto s2 = Stub(kTrainer2);
  TrainerRun run = Train(s2.get(), "c2", Reporting(3));
  EXPECT_EQ(run.reported, (std::vector<uint64_t>{11, 12, 13}));
  EXPECT_EQ(fast->trainer->resume().committed_trip, 13u);
  EXPECT_EQ(slow->CommitCount(1), 0);
  EXPECT_EQ(slow->trainer->resume().committed_trip, 0u);
  ctx.TryCancel();
  (void)stalled->Finish();
}

TEST_F(TrainerServiceTest, TheStreamEndsOkWhenTheCampaignIsDoneAndCancelledOnShutdown) {
  Campaign* c = AddCampaign("c1");
  auto stub = Stub(kTrainer1);
  // Once the trainer is attached, the campaign is done.
  RunOptions close_once_attached;
  close_once_attached.on_attached = [c] { c->trainer->Close(absl::OkStatus()); };
  TrainerRun run = Train(stub.get(), "c1", close_once_attached);
  EXPECT_EQ(run.batch_tokens, kBatchTokens) << "the stream ended before its Resume";
  EXPECT_TRUE(run.end.ok()) << run.end.error_message();
  // On shutdown an open stream ends CANCELLED.
  Campaign* d = AddCampaign("c3");
  (void)d;
  RunOptions stop_once_attached;
  stop_once_attached.on_attached = [this] { service_->Shutdown(); };
  TrainerRun stopped = Train(stub.get(), "c3", stop_once_attached);
  EXPECT_EQ(stopped.batch_tokens, kBatchTokens) << "the stream ended before its Resume";
  EXPECT_EQ(stopped.end.error_code(), grpc::StatusCode::CANCELLED);
}

// Attack (a trainer of another campaign, through name reuse): trainer t1
// attaches to its campaign "c9" while c9 exists but does not run, so its
// stream waits (TrainerServiceImpl::WaitForTrainer). Meanwhile c9 is
// cancelled and deleted (DeleteCampaign) and a new campaign is created under
// the same name, naming trainer t2, and started. The caller's name was
// checked once, by Admit before the wait; WaitForTrainer looks again only at
// the campaign's state, never at its trainer.identity, so the registry hands
// t1 the new c9's RemoteTrainer: its Resume, its lease and the plaintext
// batches of holders who named t2 (P1). Fix: re-check the caller against the
// campaign's identity each time WaitForTrainer finds a trainer (better: bind
// the stream to the campaign instance it was admitted for, e.g. its
// created_ms or request id, so a re-created name ends the stream).
TEST_F(TrainerServiceTest, AWaitingAttachIsNotHandedARecreatedCampaignOfAnotherTrainer) {
  SetInfo("c9", TrainerCampaignInfo{"external", "t1", kCampaignCreated, ""});
  auto stub = Stub(kTrainer1);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::AttachRequest req;
  req.set_campaign("c9");
  auto reader = stub->Attach(&ctx, req);
  // Admitted (one look-up) and waiting (the next ones).
  for (int i = 0; i < 1000 && Lookups("c9") < 2; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_GE(Lookups("c9"), 2) << "the stream never waited";
  // The name now belongs to another campaign, of trainer t2, which runs.
  SetInfo("c9", TrainerCampaignInfo{"external", "t2", kCampaignRunning, ""});
  Campaign* c = AddCampaign("c9");
  Produce(c, {{1, 200}});
  v1::TrainerMessage m;
  int resumes = 0, batches = 0;
  size_t leaked = 0;
  while (reader->Read(&m)) {
    if (m.has_resume()) ++resumes;
    if (m.has_batch()) {
      ++batches;
      leaked += m.batch().tokens().size();
      break;
    }
  }
  ctx.TryCancel();
  grpc::Status end = reader->Finish();
  EXPECT_EQ(resumes, 0) << "t1 was told the resume point of a campaign that names t2";
  EXPECT_EQ(batches, 0) << "t1 received " << leaked
                        << " plaintext bytes of a campaign that names t2";
  EXPECT_FALSE(end.ok());
  EXPECT_EQ(c->CommitCount(1), 0);
}

// A connection of its own (no subchannel shared with other channels), as a
// trainer process opening several would have.
std::shared_ptr<grpc::Channel> OwnConnection(const std::string& endpoint, const TlsFiles& f,
                                             int k) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = *ReadFile(f.ca);
  o.pem_cert_chain = *ReadFile(f.cert);
  o.pem_private_key = *ReadFile(f.key);
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(ServerNameFor(kOrch));
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("gputravel.test.connection", k);
  return grpc::CreateCustomChannel(endpoint, grpc::SslCredentials(o), args);
}

// Attack (a holder of a trainer certificate for another campaign starves
// this one): an Attach for a campaign that exists but does not run waits in
// TrainerServiceImpl::WaitForTrainer, holding one of the trainer listener's
// synchronous handler threads (TrainerServiceLimits: max_threads 64, 16
// streams per connection), and nothing bounds how many such waits one
// caller may have: the "one trainer per campaign" rule only applies once the
// campaign's RemoteTrainer is registered. Trainer t2, named by a campaign
// "c2" that is created but not started, opens 80 waiting Attach streams over
// 5 connections; then c1's own trainer t1 cannot attach (RESOURCE_EXHAUSTED),
// so c1's windows time out and c1 pauses. Fix: one waiting Attach per
// campaign (refuse a second one FAILED_PRECONDITION as for a running
// campaign) and/or a per-caller cap on open streams, as the API's
// WatchCampaign has (kMaxWatchesPerCaller).
TEST_F(TrainerServiceTest, WaitingAttachesOfAnotherTrainerDoNotStarveARunningCampaign) {
  Campaign* c1 = AddCampaign("c1");
  Produce(c1, {{1, 200}});
  SetInfo("c2", TrainerCampaignInfo{"external", "t2", kCampaignCreated, ""});
  // The daemon's trainer listener, with its limits.
  auto creds = MakeServerCredentials(TestFiles(pki_, kOrch));
  ASSERT_TRUE(creds.ok()) << creds.status();
  InstallRoleGate(creds->get(), TrainerServiceRoles());
  TrainerServiceImpl service([this](const std::string& c) { return Lookup(c); }, &registry_);
  const std::string endpoint = "unix:" + tmp_.path() + "/limited.sock";
  grpc::ServerBuilder b;
  b.AddListeningPort(endpoint, *creds);
  b.RegisterService(&service);
  ApplyServerLimits(TrainerServiceLimits(), "trainer", &b);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);

  // c1's own trainer attaches on a connection of its own, and leaves.
  auto t1 = v1::Trainer::NewStub(OwnConnection(endpoint, TestFiles(pki_, kTrainer1), 99));
  auto attach_c1 = [&t1](grpc::Status* end) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::AttachRequest req;
    req.set_campaign("c1");
    auto reader = t1->Attach(&ctx, req);
    v1::TrainerMessage m;
    const bool got = reader->Read(&m) && m.has_resume();
    if (got) ctx.TryCancel();
    *end = reader->Finish();
    return got;
  };
  grpc::Status end;
  ASSERT_TRUE(attach_c1(&end)) << end.error_code() << " " << end.error_message();

  constexpr int kConnections = 5, kStreams = 16;
  std::vector<std::unique_ptr<v1::Trainer::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::TrainerMessage>>> waits;
  for (int k = 0; k < kConnections; ++k) {
    stubs.push_back(v1::Trainer::NewStub(OwnConnection(endpoint, TestFiles(pki_, kTrainer2), k)));
    for (int i = 0; i < kStreams; ++i) {
      ctxs.push_back(std::make_unique<grpc::ClientContext>());
      v1::AttachRequest req;
      req.set_campaign("c2");
      waits.push_back(stubs.back()->Attach(ctxs.back().get(), req));
    }
  }
  // The waits are in the server (each looked its campaign up).
  for (int i = 0; i < 1000 && Lookups("c2") < kConnections * kStreams; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Now c1's trainer attaches again.
  EXPECT_TRUE(attach_c1(&end)) << "c1's trainer could not attach while t2 waits "
                               << Lookups("c2") << " times: " << end.error_code() << " "
                               << end.error_message();
  for (auto& x : ctxs) x->TryCancel();
  for (auto& w : waits) (void)w->Finish();
  service.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace gputravel
