// An external trainer over the emulated stack: real daemons, the Trainer
// service on the orchestrator's Unix socket, and a C++ trainer using the
// generated stub. The orchestrator is killed (SIGKILL) while the trainer is
// in the middle of a window and restarted: the trip is made safe and planned
// again, the trainer re-attaches, is told the committed pair it resumes from
// and gets the window again. Every holder's tokens are committed exactly
// once (counted per holder from the trainer's committed reports).

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"
#include "proto/trainer.grpc.pb.h"

namespace gputravel {
namespace {

constexpr char kTrainerName[] = "torch-1";

// What the trainer committed and saw.
struct Ledger {
  absl::Mutex mu;
  std::map<std::string, uint64_t> committed_tokens;  // by holder
  std::map<uint64_t, std::string> holder_of;         // by trip
  uint64_t tokens_committed = 0;                     // the orchestrator's count
  int resumes = 0;
  uint64_t last_resume_trip = 0;
  std::string last_resume_digest;
  int windows_started = 0;  // first batches seen
  int batches_without_lease = 0;
  bool done = false;
  std::string last_error;
};

std::string DigestOf(uint64_t trip) {
  std::string d(32, 'k');
  for (int i = 0; i < 8; ++i) d[i] = static_cast<char>(trip >> (8 * i));
  return d;
}

// Attaches, trains every window it is given (counting tokens), reports it,
// answers every lease release, and re-attaches whenever its stream breaks,
// until the campaign is done (the stream ends OK) or `stop` is set.
// It holds its second window's first batch until `killed` is notified: the
// orchestrator dies with that window delivered and not reported.
void RunTrainer(const std::string& endpoint, const TlsFiles& tls, Ledger* ledger,
                std::atomic<bool>* stop, absl::Notification* killed) {
  auto ch = MakeSecureChannel(endpoint, tls, Identity{kRoleOrchestrator, "orchestrator"});
  ASSERT_TRUE(ch.ok()) << ch.status();
  auto stub = v1::Trainer::NewStub(*ch);
  while (!stop->load()) {
    grpc::ClientContext ctx;
    v1::AttachRequest req;
    req.set_campaign("demo");
    auto reader = stub->Attach(&ctx, req);
    v1::TrainerMessage m;
    bool lease = false;
    uint64_t trip = 0, tokens = 0;
    int batches = 0;
    while (reader->Read(&m)) {
      if (m.has_resume()) {
        absl::MutexLock l(&ledger->mu);
        ++ledger->resumes;
        ledger->last_resume_trip = m.resume().committed_trip();
        ledger->last_resume_digest = m.resume().checkpoint_sha256();
        // The trainer would load this checkpoint: it must be the one it
        // reported with that trip.
        if (m.resume().committed_trip() != 0) {
          EXPECT_EQ(m.resume().checkpoint_sha256(), DigestOf(m.resume().committed_trip()));
          EXPECT_EQ(m.resume().tokens_committed(), ledger->tokens_committed);
        }
      } else if (m.has_lease()) {
        lease = !m.lease().release();
        if (m.lease().release()) {
          grpc::ClientContext rc;
          v1::LeaseReleased rel;
          rel.set_campaign("demo");
          rel.set_lease_id(m.lease().lease_id());
          v1::LeaseReleasedAck ack;
          (void)stub->ReleaseLease(&rc, rel, &ack);
        }
      } else if (m.has_batch()) {
        const v1::Batch& b = m.batch();
        if (!lease) {
          absl::MutexLock l(&ledger->mu);
          ++ledger->batches_without_lease;
        }
        if (b.index() == 0) {
          trip = b.trip();
          tokens = 0;
          batches = 0;
          int started = 0;
          {
            absl::MutexLock l(&ledger->mu);
            started = ++ledger->windows_started;
            ledger->holder_of[trip] = b.holder();
          }
          if (started == 2) (void)killed->WaitForNotificationWithTimeout(absl::Seconds(30));
        }
        const uint64_t n = b.tokens().size() / 2;
        tokens += batches == 0 ? n : n - 1;
        ++batches;
        if (b.last_of_window()) {
          v1::WindowReport r;
          r.set_campaign("demo");
          r.set_trip(trip);
          r.set_tokens(tokens);
          for (int i = 0; i < batches; ++i) r.add_batch_loss(3.0);
          r.set_checkpoint_sha256(DigestOf(trip));
          grpc::ClientContext rc;
          v1::WindowCommitted done;
          grpc::Status s = stub->ReportWindow(&rc, r, &done);
          absl::MutexLock l(&ledger->mu);
          if (s.ok()) {
            ledger->committed_tokens[b.holder()] += tokens;
            ledger->tokens_committed = done.tokens_committed();
          } else {
            ledger->last_error = s.error_message();
          }
        }
      }
    }
    grpc::Status end = reader->Finish();
    if (end.ok()) {
      absl::MutexLock l(&ledger->mu);
      ledger->done = true;
      return;
    }
    // Re-attaches at a trainer's pace while the orchestrator is down.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

TEST(ExternalTrainerTest, AnOrchestratorKilledMidWindowResumesFromTheCommittedPair) {
  StackOptions o;
  o.holders = 2;
  o.buffer_bytes = 2u << 20;
  o.chunk_bytes = 512u << 10;
  o.copy_engines = 1;
  o.eval_set = false;
  o.external_trainer = kTrainerName;
  // The holders opt in to an external trainer.
  o.holder_training_policy = {{"min_windows_per_loss", 1},
                              {"trainer_kinds", {"external"}}};
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  EmulatedStack* st = stack->get();
  auto api = st->OperatorClient();
  {
    v1::CreateCampaignRequest req;
    req.set_request_id("external-1");
    req.set_spec_json(st->CampaignSpec().dump());
    v1::CreateCampaignResponse created;
    grpc::ClientContext ctx;
    grpc::Status s = api->CreateCampaign(&ctx, req, &created);
    ASSERT_TRUE(s.ok()) << s.error_message();
    v1::CampaignRef ref;
    ref.set_name("demo");
    v1::Campaign c;
    grpc::ClientContext ctx2;
    s = api->StartCampaign(&ctx2, ref, &c);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // The Trainer service is served on trainer_listen only: at the API
  // endpoint a trainer's call is refused before it reaches a service.
  {
    auto ch = MakeSecureChannel(st->orchestrator_endpoint(), st->tls({kRoleTrainer, kTrainerName}),
                                Identity{kRoleOrchestrator, "orchestrator"});
    ASSERT_TRUE(ch.ok()) << ch.status();
    auto wrong_port = v1::Trainer::NewStub(*ch);
    grpc::ClientContext ctx;
    v1::AttachRequest req;
    req.set_campaign("demo");
    auto reader = wrong_port->Attach(&ctx, req);
    v1::TrainerMessage m;
    EXPECT_FALSE(reader->Read(&m));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  Ledger ledger;
  std::atomic<bool> stop{false};
  absl::Notification was_killed;
  std::thread trainer(RunTrainer, st->trainer_endpoint(),
                      st->tls({kRoleTrainer, kTrainerName}), &ledger, &stop, &was_killed);
  // Kill the orchestrator once the trainer is inside its second window.
  bool second_window = false;
  {
    absl::MutexLock l(&ledger.mu);
    auto started_or_done = [&ledger] { return ledger.windows_started >= 2 || ledger.done; };
    (void)ledger.mu.AwaitWithTimeout(absl::Condition(&started_or_done), absl::Seconds(60));
    second_window = ledger.windows_started >= 2;
  }
  ASSERT_TRUE(second_window) << "the trainer never started a second window";
  Subprocess* orch = st->process("orchestrator");
  orch->Kill();
  ASSERT_FALSE(orch->Running());
  was_killed.Notify();
  absl::Status restarted = st->Restart("orchestrator");
  ASSERT_TRUE(restarted.ok()) << restarted;
  auto final_state = st->WaitForFinal("demo", 240, /*paused_ends_wait=*/true);
  stop.store(true);
  trainer.join();
  ASSERT_TRUE(final_state.ok()) << final_state.status();
  EXPECT_EQ(final_state->state(), v1::COMPLETED) << final_state->error();
  absl::MutexLock l(&ledger.mu);
  EXPECT_TRUE(ledger.done) << ledger.last_error;
  EXPECT_EQ(ledger.batches_without_lease, 0);
  EXPECT_GE(ledger.resumes, 2) << "attached again after the restart";
  // Every holder's tokens were committed exactly once: 3 MiB and 5.5 MiB.
  EXPECT_EQ(ledger.committed_tokens["holder-a"], (uint64_t{3} << 20) / 2);
  EXPECT_EQ(ledger.committed_tokens["holder-b"], ((uint64_t{11} << 19)) / 2);
  EXPECT_EQ(ledger.tokens_committed, ledger.committed_tokens["holder-a"] +
                                         ledger.committed_tokens["holder-b"]);
  int aborted = 0;
  for (const auto& t : final_state->trips()) aborted += t.outcome() == "aborted";
  EXPECT_GE(aborted, 1) << "the window in training when the orchestrator died";
}

// A trainer that never attaches: the first trip fails after
// trainer.timeout_seconds, the campaign pauses (trainer.on_failure "pause")
// with an error naming the trainer, and the holder is not charged.
TEST(ExternalTrainerTest, ATrainerThatNeverAttachesPausesTheCampaignWithoutChargingTheHolder) {
  StackOptions o;
  o.holders = 1;
  o.buffer_bytes = 2u << 20;
  o.chunk_bytes = 512u << 10;
  o.copy_engines = 1;
  o.eval_set = false;
  o.external_trainer = kTrainerName;
  o.holder_training_policy = {{"min_windows_per_loss", 1}, {"trainer_kinds", {"external"}}};
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  nlohmann::json spec = (*stack)->CampaignSpec();
  spec["trainer"]["timeout_seconds"] = 2;
  auto c = (*stack)->RunCampaign(&spec);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state(), v1::PAUSED);
  EXPECT_NE(c->error().find("trainer 'torch-1' of campaign 'demo' is not attached"),
            std::string::npos)
      << c->error();
  EXPECT_NE(c->error().find("is not charged"), std::string::npos) << c->error();
  ASSERT_EQ(c->holders_size(), 1);
  EXPECT_EQ(c->holders(0).state(), "active");
  ASSERT_GE(c->trips_size(), 1);
  EXPECT_EQ(c->trips(0).outcome(), "failed");
}

// Without trainer_listen no trainer could attach: create refuses the spec.
TEST(ExternalTrainerTest, AnOrchestratorWithoutTrainerListenRefusesAnExternalTrainer) {
  StackOptions o;
  o.holders = 1;
  o.buffer_bytes = 2u << 20;
  o.eval_set = false;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  nlohmann::json spec = (*stack)->CampaignSpec();
  spec["trainer"] = {{"kind", "external"}, {"identity", kTrainerName}, {"batch_tokens", 16384}};
  v1::CreateCampaignRequest req;
  req.set_request_id("no-listener");
  req.set_spec_json(spec.dump());
  v1::CreateCampaignResponse created;
  grpc::ClientContext ctx;
  grpc::Status s = (*stack)->OperatorClient()->CreateCampaign(&ctx, req, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("no trainer_listen"), std::string::npos) << s.error_message();
}

// Attack (a scheduler or operator cancels; the trainer keeps training): the
// campaign is cancelled while its external trainer is inside a window.
// CampaignEngine::Cancel cancels the trip and abandons the in-process
// DataLoader (Gpu::loader) but not the campaign's RemoteTrainer
// (Gpu::remote), whose window is a different loader. So after the cancel the
// trainer still receives the rest of the holder's plaintext, its report
// still commits the window (a cancelled campaign trains and checkpoints one
// more window of a holder that was told it is cancelled), and the cancel
// waits for the trainer (up to trainer.timeout_seconds) instead of making the
// GPU safe at once. Fix: Cancel must also call running->remote->Abandon()
// (as Shutdown does), so the window's bytes are zeroized and its report is
// refused.
TEST(ExternalTrainerTest, CancelAbandonsTheExternalTrainersWindow) {
  StackOptions o;
  o.holders = 1;
  o.buffer_bytes = 2u << 20;
  o.chunk_bytes = 512u << 10;
  o.copy_engines = 1;
  o.eval_set = false;
  o.external_trainer = kTrainerName;
  o.holder_training_policy = {{"min_windows_per_loss", 1}, {"trainer_kinds", {"external"}}};
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  EmulatedStack* st = stack->get();
  auto api = st->OperatorClient();
  nlohmann::json spec = st->CampaignSpec();
  spec["trainer"]["timeout_seconds"] = 60;
  {
    v1::CreateCampaignRequest req;
    req.set_request_id("cancel-external");
    req.set_spec_json(spec.dump());
    v1::CreateCampaignResponse created;
    grpc::ClientContext ctx;
    grpc::Status s = api->CreateCampaign(&ctx, req, &created);
    ASSERT_TRUE(s.ok()) << s.error_message();
    v1::CampaignRef ref;
    ref.set_name("demo");
    v1::Campaign c;
    grpc::ClientContext ctx2;
    s = api->StartCampaign(&ctx2, ref, &c);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  auto ch = MakeSecureChannel(st->trainer_endpoint(), st->tls({kRoleTrainer, kTrainerName}),
                              Identity{kRoleOrchestrator, "orchestrator"});
  ASSERT_TRUE(ch.ok()) << ch.status();
  auto stub = v1::Trainer::NewStub(*ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::AttachRequest req;
  req.set_campaign("demo");
  auto reader = stub->Attach(&ctx, req);
  v1::TrainerMessage m;
  bool cancelled = false;
  int batches_after_cancel = 0;
  uint64_t tokens = 0;
  int batches = 0;
  grpc::Status report = grpc::Status(grpc::StatusCode::UNKNOWN, "not reported");
  // To the stream's end (the run's), answering the withdrawn lease's release
  // as a trainer does: one that walks away leaves the engine waiting
  // release_timeout_seconds for it.
  while (reader->Read(&m)) {
    if (m.has_lease() && m.lease().release()) {
      grpc::ClientContext rc;
      v1::LeaseReleased rel;
      rel.set_campaign("demo");
      rel.set_lease_id(m.lease().lease_id());
      v1::LeaseReleasedAck ack;
      (void)stub->ReleaseLease(&rc, rel, &ack);
    }
    if (!m.has_batch()) continue;
    const v1::Batch& b = m.batch();
    const uint64_t n = b.tokens().size() / 2;
    tokens += batches == 0 ? n : n - 1;
    ++batches;
    if (cancelled) ++batches_after_cancel;
    if (!cancelled) {
      // The operator cancels the campaign in the middle of the window.
      v1::CampaignRef ref;
      ref.set_name("demo");
      v1::Campaign c;
      grpc::ClientContext cc;
      grpc::Status s = api->CancelCampaign(&cc, ref, &c);
      ASSERT_TRUE(s.ok()) << s.error_message();
      cancelled = true;
    }
    if (b.last_of_window()) {
      v1::WindowReport r;
      r.set_campaign("demo");
      r.set_trip(b.trip());
      r.set_tokens(tokens);
      for (int i = 0; i < batches; ++i) r.add_batch_loss(3.0);
      r.set_checkpoint_sha256(DigestOf(b.trip()));
      grpc::ClientContext rc;
      v1::WindowCommitted done;
      report = stub->ReportWindow(&rc, r, &done);
    }
  }
  ctx.TryCancel();
  (void)reader->Finish();
  auto final_state = st->WaitForFinal("demo", 120);
  ASSERT_TRUE(final_state.ok()) << final_state.status();
  EXPECT_EQ(final_state->state(), v1::CANCELLED) << final_state->error();
  EXPECT_FALSE(report.ok()) << "the window of a cancelled campaign was committed after "
                            << batches_after_cancel << " more plaintext batches";
  for (const auto& t : final_state->trips()) {
    EXPECT_FALSE(t.has_loss()) << "trip " << t.id() << " was trained after the cancel";
  }
}

}  // namespace
}  // namespace gputravel
