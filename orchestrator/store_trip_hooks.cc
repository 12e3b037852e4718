#include "orchestrator/store_trip_hooks.h"

#include <cstdio>
#include <optional>
#include <utility>

#include "absl/time/clock.h"
#include "orchestrator/attestation_record.h"
#include "proto/trainer.pb.h"
#include "util/failpoint.h"
#include "util/log.h"

namespace gputravel {
namespace {

std::string Pct(double loss) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", loss);
  return buf;
}

}  // namespace

StoreTripHooks::StoreTripHooks(StateStore* store, CommitNotifier notify,
                               std::function<void(uint64_t bytes, uint64_t total)> progress,
                               const TripPlan* plan, DataLoader* loader,
                               BuiltinTrainer* trainer,
                               const std::vector<uint16_t>* eval_tokens,
                               double train_timeout_seconds, RemoteTrainer* remote)
    : store_(store), notify_(std::move(notify)), progress_(std::move(progress)), plan_(plan),
      loader_(loader), trainer_(trainer), eval_tokens_(eval_tokens),
      train_timeout_(train_timeout_seconds), remote_(remote) {}

absl::Status StoreTripHooks::Step(TripStep step, const std::string& message) {
  auto seqs = store_->SetTripStep(plan_->trip, ToString(step), message);
  notify_(seqs);
  if (seqs.ok()) CrashPoint(std::string("after_commit:") + ToString(step));
  return seqs.status();
}

absl::Status StoreTripHooks::RouteOut(const TripCounterWindow& window,
                                      const std::string& message) {
  auto seqs = store_->SetTripStep(plan_->trip, kStepRouteOut, message, window);
  notify_(seqs);
  if (seqs.ok()) CrashPoint(std::string("after_commit:") + kStepRouteOut);
  return seqs.status();
}

void StoreTripHooks::Progress(uint64_t bytes, uint64_t total) {
  progress_(bytes, total);
}

absl::Status StoreTripHooks::Provisioned(uint64_t bytes, uint64_t chunks, double seconds,
                                         bool digest_match, TripStep then_step,
                                         const std::string& then_message) {
  progress_(bytes, plan_->window_length);
  auto seqs = store_->RecordProvisioned(plan_->trip, bytes, chunks, seconds, digest_match,
                                        ToString(then_step), then_message);
  notify_(seqs);
  if (seqs.ok()) CrashPoint(std::string("after_commit:") + ToString(then_step));
  return seqs.status();
}

bool StoreTripHooks::Trains() const { return trainer_ != nullptr || remote_ != nullptr; }
void StoreTripHooks::Rekeyed() {
  if (on_rekeyed_) on_rekeyed_();
}

void StoreTripHooks::set_on_rekeyed(std::function<void()> f) { on_rekeyed_ = std::move(f); }
void StoreTripHooks::Scrubbed() {
  EventRow e;
  e.campaign = plan_->campaign;
  e.trip = plan_->trip;
  e.kind = "scrubbed";
  e.step = kStepScrub;
  e.message = "buffer zeroed and verified";
  e.bytes = plan_->buffer_bytes;
  auto seq = store_->AppendEvent(e);
  if (seq.ok()) notify_(EventSeqs{*seq});
}

void StoreTripHooks::Attested(const AttestedIdentity& peer) {
  const v1::VerifiedAttestation record = RecordOf(peer, absl::ToUnixMillis(absl::Now()));
  auto previous = store_->RecordAttestation(plan_->trip, record.SerializeAsString());
  if (!previous.ok()) {
    GT_LOG(0, "trip ", plan_->trip, ": recording holder ", plan_->holder,
           "'s attestation: ", previous.status().message());
    return;
  }
  // Logged when first seen and when it changes, not at every trip.
  v1::VerifiedAttestation before;
  if (previous->empty() || !before.ParseFromString(*previous) ||
      !SameAttestation(before, record)) {
    GT_LOG(1, "holder ", plan_->holder, " attested: ", DescribeAttestation(record));
  }
}

TrainingWindow StoreTripHooks::Window(const std::string& plaintext) const {
  TrainingWindow w;
  w.campaign = plan_->campaign;
  w.trip = plan_->trip;
  w.holder = plan_->holder;
  w.window_offset = plan_->window_offset;
  w.tokens = plaintext;  // the loader zeroizes its copy once consumed
  return w;
}

absl::StatusOr<bool> StoreTripHooks::TrainRemote(const std::string& plaintext) {
  // The trainer's report, committed with the trip in one transaction: the
  // campaign's resume point (sealed like a model) and the report on the trip.
  auto commit = [this](const WindowResult& r, const ResumePoint& after) -> absl::Status {
    v1::Resume resume;
    resume.set_committed_trip(after.committed_trip);
    resume.set_checkpoint_sha256(after.checkpoint_sha256);
    resume.set_tokens_committed(after.tokens_committed);
    resume.set_batch_tokens(remote_->options().batch_tokens);
    resume.set_vocab(remote_->options().vocab);
    auto seqs = store_->RecordTrained(plan_->trip, r.mean_loss, std::nullopt,
                                      resume.SerializeAsString(),
                                      ExternalTrainerReport{after.checkpoint_sha256, r.tokens});
    notify_(seqs);
    if (!seqs.ok()) return seqs.status();
    CrashPoint(std::string("after_commit:") + ToString(StepAfterTrained()));
    return absl::OkStatus();
  };
  auto event = [this](const std::string& message) {
    EventRow e;
    e.campaign = plan_->campaign;
    e.trip = plan_->trip;
    e.kind = "trainer";
    e.message = message;
    auto seq = store_->AppendEvent(e);
    if (seq.ok()) notify_(EventSeqs{*seq});
    GT_LOG(0, "campaign ", plan_->campaign, ": ", message);
  };
  auto r = remote_->TrainWindow(Window(plaintext), commit, event);
  if (!r.ok()) {
    trainer_failed_ = true;
    return r.status();
  }
  GT_LOG(1, "trip ", plan_->trip, ": trainer '", remote_->options().identity, "' trained ",
         r->tokens, " tokens");
  return true;
}

absl::StatusOr<bool> StoreTripHooks::Train(const std::string& plaintext) {
  if (remote_ != nullptr) return TrainRemote(plaintext);
  if (trainer_ == nullptr) return false;
  auto r = loader_->Offer(Window(plaintext), absl::Seconds(train_timeout_));
  if (!r.ok()) return r.status();
  // The held-out loss on the orchestrator's own evaluation set, after
  // this window; stored with it, reported only as the terms allow.
  std::optional<double> eval;
  if (!eval_tokens_->empty()) {
    eval = trainer_->Evaluate(eval_tokens_->data(), eval_tokens_->size());
  }
  auto seqs = store_->RecordTrained(plan_->trip, r->mean_loss, eval, trainer_->Checkpoint());
  notify_(seqs);
  if (!seqs.ok()) return seqs.status();
  CrashPoint(std::string("after_commit:") + ToString(StepAfterTrained()));
  // The log leaves the TD too: it shows what the API shows, no more.
  auto trip = store_->GetTrip(plan_->trip);
  if (trip.ok() && trip->reported_loss.has_value()) {
    GT_LOG(1, "trip ", plan_->trip, ": trained ", r->tokens, " tokens; reported loss ",
           Pct(*trip->reported_loss),
           trip->reported_eval_loss ? ", held-out " + Pct(*trip->reported_eval_loss) : "");
  } else {
    GT_LOG(1, "trip ", plan_->trip, ": trained ", r->tokens, " tokens");
  }
  return true;
}

}  // namespace gputravel
