#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "orchestrator/schedule.h"
#include "orchestrator/sqlite_db.h"
#include "orchestrator/state_rows.h"
#include "orchestrator/state_store.h"
#include "proto/training.pb.h"
#include "trainer/training_policy.h"
#include "util/status_macros.h"

// The state store's trip records: a trip from its plan to its finish, each
// step committed with its event (state_store.h); the campaigns, holders and
// events are in state_store.cc.

namespace gputravel {


absl::StatusOr<std::string> StateStore::RecordAttestation(uint64_t trip_id,
                                                          const std::string& attestation) {
  std::string previous;
  auto done = Mutate(Durability::kLazy, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, t.campaign, t.holder));
    previous = h.attestation;
    GT_RETURN_IF_ERROR(
        db_->Run("UPDATE trips SET attestation = ? WHERE id = ?", BlobRef{attestation}, trip_id));
    return db_->Run("UPDATE holders SET attestation = ? WHERE campaign = ? AND name = ?",
                    BlobRef{attestation}, t.campaign, t.holder);
  });
  if (!done.ok()) return done.status();
  return previous;
}

absl::StatusOr<EventSeqs> StateStore::BeginTrip(const TripRow& t) {
  if (t.id == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quoted(t.campaign),
                     ": trip id 0; take the id from NextTripId()"));
  }
  if (t.window_length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(TripName(t), ": empty dataset window"));
  }
  return Mutate(Durability::kLazy, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    {
      // Fencing tokens are only safe if they were issued by the counter.
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT value FROM counters WHERE name = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(kTripCounter).Step());
      uint64_t issued = row ? s.ColU64(0) : 0;
      if (t.id > issued) {
        return absl::InvalidArgumentError(absl::StrCat(
            TripName(t), ": id was never issued by NextTripId (latest ", issued, ")"));
      }
    }
    {
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT campaign FROM trips WHERE id = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(t.id).Step());
      if (row) {
        return absl::AlreadyExistsError(absl::StrCat("trip ", t.id, " already exists in campaign ",
                                                     Quoted(s.ColText(0)), "; take a new id"));
      }
    }
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, t.campaign));
    if (c.state != kCampaignRunning) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quoted(c.name), " is ", c.state,
                       ", not running; trip ", t.id, " cannot start"));
    }
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, t.campaign, t.holder));
    if (h.state != kHolderActive) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), ": holder is ", h.state, ", not active"));
    }
    if (t.window_offset > h.dataset_bytes ||
        t.window_length > h.dataset_bytes - t.window_offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          TripName(t), ": window [", t.window_offset, ", +", t.window_length,
          ") exceeds the holder's dataset of ", h.dataset_bytes, " bytes"));
    }
    {
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT id, step FROM trips WHERE campaign = ? AND "
                                               "step NOT IN ('done', 'aborted') LIMIT 1"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(t.campaign).Step());
      if (row) {
        return absl::FailedPreconditionError(
            absl::StrCat("campaign ", Quoted(t.campaign), " still has trip ",
                         s.ColInt(0), " at step ", s.ColText(1),
                         "; finish or abort it before trip ", t.id));
      }
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("INSERT INTO trips (id, campaign, holder, "
                                "window_offset, window_length, round, step, "
                                "started_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                t.id, t.campaign, t.holder, t.window_offset, t.window_length,
                                t.round, kStepPlanned, now));
    GT_RETURN_IF_ERROR(
        db_->Run("UPDATE campaigns SET last_holder = ?, updated_ms = ? WHERE name = ?",
                 t.holder, now, t.campaign));
    EventRow e = StampedEvent(t.campaign, t.id, "trip_started", kStepPlanned,
                       absl::StrCat("holder ", Quoted(t.holder), " window [", t.window_offset,
                                    ", +", t.window_length, ") round ", t.round),
                       now);
    e.bytes = t.window_length;
    return AppendLocked(e);
  });
}

absl::Status StateStore::MoveStepLocked(const TripRow& t, TripStep to, const std::string& message,
                                        const std::optional<TripCounterWindow>& window) {
  const std::string step = ToString(to);
  const std::optional<TripStep> from = TripStepFromString(t.step);
  if (from.has_value() && !CanFinish(*from)) {
    return absl::FailedPreconditionError(
        absl::StrCat(TripName(t), " already finished (", t.step,
                     "); it cannot move to ", step));
  }
  if (from.has_value() && !CanCommitStep(*from, to)) {
    return absl::FailedPreconditionError(
        absl::StrCat(TripName(t), " is at step ", t.step,
                     "; steps only move forward, not back to ", step));
  }
  const int64_t now = NowMs();
  GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET step = ? WHERE id = ?", step, t.id));
  if (window.has_value()) {
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET gpu_session = ?, first_counter = ?, "
                                "counter_count = ?, gpu_serial = ? WHERE id = ?",
                                window->gpu_session, window->first, window->count,
                                window->gpu_serial, t.id));
  }
  return AppendLocked(StampedEvent(t.campaign, t.id, "step", step, message, now));
}

absl::StatusOr<EventSeqs> StateStore::SetTripStep(
    uint64_t trip_id, const std::string& step, const std::string& message,
    const std::optional<TripCounterWindow>& window) {
  const std::optional<TripStep> to = TripStepFromString(step);
  if ((step == kStepRouteOut) != window.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": the counter window is recorded with step route_out",
        " (before the GPU leaves), and only there"));
  }
  if (!to.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": unknown step ", Quoted(step)));
  }
  if (IsFinal(*to)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": step ", step,
                     " is set by FinishTrip, which also counts the trip"));
  }
  return Mutate(step == kStepRouteOut ? Durability::kFlush : Durability::kLazy,
                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
                  GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
                  return MoveStepLocked(t, *to, message, window);
                });
}

absl::StatusOr<EventSeqs> StateStore::RecordProvisioned(uint64_t trip_id, uint64_t bytes,
                                                        uint64_t chunks, double seconds,
                                                        bool digest_match,
                                                        const char* then_step,
                                                        const std::string& then_message) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": provisioning time ", seconds, " is not valid"));
  }
  std::optional<TripStep> then;
  if (then_step != nullptr) {
    then = TripStepFromString(then_step);
    if (then != StepAfterProvisioned(true) && then != StepAfterProvisioned(false)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trip ", trip_id, ": after the provisioning report a trip moves to ",
          ToString(StepAfterProvisioned(true)), " or ", ToString(StepAfterProvisioned(false)),
          ", not ", Quoted(then_step)));
    }
  }
  return Mutate(Durability::kLazy, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    const std::optional<TripStep> at = TripStepFromString(t.step);
    if (!at.has_value() || !AcceptsProvisioningReport(*at)) {
      return absl::FailedPreconditionError(absl::StrCat(
          TripName(t), " is at step ", t.step,
          "; a provisioning report belongs to steps provision..rekey"));
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET bytes = ?, chunks = ?, provision_seconds = ?, "
                                "digest_match = ? WHERE id = ?",
                                bytes, chunks, seconds, digest_match, trip_id));
    EventRow e = StampedEvent(t.campaign, trip_id, "provisioned", t.step,
                       absl::StrCat(chunks, " chunks in ", seconds, " s, digest ",
                                    digest_match ? "matches" : "MISMATCH"),
                       now);
    e.bytes = bytes;
    GT_RETURN_IF_ERROR(AppendLocked(e));
    if (!then.has_value()) return absl::OkStatus();
    return MoveStepLocked(t, *then, then_message, std::nullopt);
  });
}

absl::StatusOr<EventSeqs> StateStore::RecordTrained(
    uint64_t trip_id, double loss, std::optional<double> eval_loss,
    const std::string& model_blob, const std::optional<ExternalTrainerReport>& external) {
  if (external.has_value() && external->checkpoint_sha256.size() != 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": the trainer's checkpoint digest is ",
        external->checkpoint_sha256.size(), " bytes, not a SHA-256 (32)"));
  }
  if (!std::isfinite(loss) || (eval_loss.has_value() && !std::isfinite(*eval_loss))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": the ", std::isfinite(loss) ? "held-out loss" : "training loss",
        " is not finite; training diverged, finish the trip failed instead "
        "of checkpointing it (the error is served: it names no loss)"));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    if (t.trained) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t),
                       " was already trained and checkpointed; a window is "
                       "never trained twice"));
    }
    if (t.step != ToString(kStepOfTraining)) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), " is at step ", t.step,
                       ", not train; commit step train before training"));
    }
    // What may be reported: the block of trained windows since the last
    // report, this one included, under the campaign's terms.
    v1::TrainingTerms terms = Strictest(v1::TrainingTerms(), {});
    {
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT terms FROM campaigns WHERE name = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(t.campaign).Step());
      const std::string blob = row ? s.ColBlob(0) : std::string();
      if (!blob.empty() && !terms.ParseFromString(blob)) {
        return absl::DataLossError(absl::StrCat("campaign ", Quoted(t.campaign),
                                                ": its training terms in ", db_->path(),
                                                " cannot be parsed"));
      }
    }
    // The block counts windows per holder: a co-holder's windows (whose
    // losses it and the operator can work out) must not stand in for
    // another holder's, so the block is reported only once every holder
    // that trained in it has trained min_windows_per_loss windows in it.
    std::vector<double> block;
    std::map<std::string, uint64_t> windows_of;
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, db_->Prepare("SELECT loss, holder FROM trips WHERE campaign = ? AND trained = 1 "
                               "AND id > (SELECT COALESCE(MAX(id), 0) FROM trips "
                               "WHERE campaign = ? AND reported_loss IS NOT NULL) "
                               "ORDER BY id"));
      s.Bind(t.campaign, t.campaign);
      for (;;) {
        GT_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        block.push_back(s.ColReal(0));
        ++windows_of[s.ColText(1)];
      }
    }
    block.push_back(loss);
    ++windows_of[t.holder];
    bool every_holder_filled = true;
    for (const auto& [holder, n] : windows_of) {
      every_holder_filled &= n >= std::max<uint64_t>(1, terms.min_windows_per_loss());
    }
    const std::optional<double> reported =
        every_holder_filled ? ReportedLoss(block, terms) : std::nullopt;
    std::optional<double> reported_eval;
    if (reported && eval_loss) reported_eval = RoundLoss(*eval_loss, terms.loss_decimals());
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET loss = ?, eval_loss = ?, reported_loss = ?, "
                                "reported_eval_loss = ?, trained = 1, step = ? WHERE id = ?",
                                loss, eval_loss, reported, reported_eval,
                                ToString(StepAfterTrained()), trip_id));
    if (external.has_value()) {
      GT_RETURN_IF_ERROR(db_->Run(
          "UPDATE trips SET trainer_checkpoint = ?, trainer_tokens = ? WHERE id = ?",
          BlobRef{external->checkpoint_sha256}, external->tokens, trip_id));
    }
    // Sealed, bound to the campaign and this trip.
    GT_ASSIGN_OR_RETURN(std::string sealed, seal_.Seal(t.campaign, trip_id, model_blob));
    if (reported) {
      GT_RETURN_IF_ERROR(db_->Run("UPDATE campaigns SET model = ?, model_trip = ?, "
                                  "last_loss = ?, last_eval_loss = ?, updated_ms = ? "
                                  "WHERE name = ?",
                                  BlobRef{sealed}, trip_id, reported, reported_eval, now,
                                  t.campaign));
    } else {
      GT_RETURN_IF_ERROR(
          db_->Run("UPDATE campaigns SET model = ?, model_trip = ?, updated_ms = ? "
                   "WHERE name = ?",
                   BlobRef{sealed}, trip_id, now, t.campaign));
    }
    EventRow trained = StampedEvent(
        t.campaign, trip_id, "trained", kStepTrain,
        reported ? absl::StrCat("checkpoint of ", model_blob.size(), " bytes; loss over the last ",
                                block.size(), " trained windows")
                 : absl::StrCat("checkpoint of ", model_blob.size(), " bytes; loss reported per ",
                                terms.min_windows_per_loss(), " windows of each holder (",
                                block.size(), " so far)"),
        now);
    trained.bytes = t.window_length;
    trained.loss = reported;
    trained.eval_loss = reported_eval;
    GT_RETURN_IF_ERROR(AppendLocked(trained));
    return AppendLocked(StampedEvent(t.campaign, trip_id, "step", ToString(StepAfterTrained()),
                              "scrub after training", now));
  });
}

std::string TripOutcomeOf(const EventRow& e) {
  if (e.kind != "trip_finished") return "";
  for (const char* outcome : {kOutcomeOk, kOutcomeFailed, kOutcomeAborted}) {
    const absl::string_view o(outcome);
    if (absl::StartsWith(e.message, o) &&
        (e.message.size() == o.size() || e.message[o.size()] == ':')) {
      return outcome;
    }
  }
  return "";
}

absl::StatusOr<EventSeqs> StateStore::FinishTrip(uint64_t trip_id, const TripFinish& f) {
  const bool ok = f.outcome == kOutcomeOk;
  if (!ok && f.outcome != kOutcomeFailed && f.outcome != kOutcomeAborted) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": unknown outcome ", Quoted(f.outcome)));
  }
  if (ok && !(f.scrub_verified && f.rekeyed)) {
    // P2/P3: a trip whose buffer was not verifiably scrubbed or whose holder
    // key is not yet dead is not a success, whatever else happened.
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id,
                     " cannot finish ok without a verified scrub and a "
                     "re-key; finish it failed"));
  }
  if (f.advance_cursor && !ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": only an ok trip advances the holder's cursor"));
  }
  if (f.fail_holder && ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": an ok trip cannot fail its holder"));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    const std::optional<TripStep> from = TripStepFromString(t.step);
    if (from.has_value() && !CanFinish(*from)) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), " already finished with outcome ",
                       t.outcome, "; every trip is counted once"));
    }
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, t.campaign));
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, t.campaign, t.holder));
    const std::string final_step = ToString(FinalStep(f.outcome == kOutcomeAborted));
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET step = ?, outcome = ?, error = ?, "
                                "scrub_verified = ?, rekeyed = ?, ended_ms = ?, "
                                "duration_us = ? WHERE id = ?",
                                final_step, f.outcome, f.error, f.scrub_verified, f.rekeyed, now,
                                std::max<int64_t>(0, f.duration_us), trip_id));

    const std::string old_holder_state = h.state;
    if (ok) {
      h.trips += 1;
      h.bytes += t.bytes;
      if (f.advance_cursor) {
        if (h.state != kHolderActive) {
          return absl::FailedPreconditionError(
              absl::StrCat(TripName(t), ": holder is ", h.state,
                           "; its cursor no longer moves"));
        }
        // The window must be the one at the cursor: otherwise it was already
        // counted (or skipped), and moving on would lose or repeat data.
        if (t.window_offset != h.cursor_offset || t.round != h.round) {
          return absl::FailedPreconditionError(absl::StrCat(
              TripName(t), " covers offset ", t.window_offset, " of round ",
              t.round, " but the holder's cursor is at offset ",
              h.cursor_offset, " of round ", h.round,
              "; the window does not advance the cursor"));
        }
        // The schedule's own bookkeeping (schedule.h), the one the engine
        // plans with: a window reaching the end completes a pass.
        const HolderProgress next = AdvanceProgress(
            HolderProgress{h.dataset_bytes, h.cursor_offset, h.round, true}, t.window_length);
        h.cursor_offset = next.cursor_offset;
        h.round = next.round;
        if (HolderFinished(next, c.rounds)) h.state = kHolderDone;
      }
    } else if (f.fail_holder) {
      h.state = kHolderFailed;
      h.error = f.error.empty() ? absl::StrCat("trip ", trip_id, " ", f.outcome) : f.error;
    }
    GT_RETURN_IF_ERROR(db_->Run("UPDATE holders SET cursor_offset = ?, round = ?, "
                                "state = ?, error = ?, trips = ?, bytes = ? "
                                "WHERE campaign = ? AND name = ?",
                                h.cursor_offset, h.round, h.state, h.error, h.trips, h.bytes,
                                h.campaign, h.name));
    GT_RETURN_IF_ERROR(db_->Run("UPDATE campaigns SET trips_ok = trips_ok + ?, "
                                "trips_failed = trips_failed + ?, "
                                "trips_aborted = trips_aborted + ?, "
                                "bytes_provisioned = bytes_provisioned + ?, "
                                "updated_ms = ? WHERE name = ?",
                                ok, f.outcome == kOutcomeFailed, f.outcome == kOutcomeAborted,
                                ok ? t.bytes : 0, now, t.campaign));
    EventRow e = StampedEvent(t.campaign, trip_id, "trip_finished", final_step,
                       f.error.empty() ? f.outcome : absl::StrCat(f.outcome, ": ", f.error), now);
    e.bytes = t.bytes;
    e.loss = t.reported_loss;
    e.eval_loss = t.reported_eval_loss;
    GT_RETURN_IF_ERROR(AppendLocked(e));
    if (h.state == old_holder_state) return absl::OkStatus();
    return AppendLocked(StampedEvent(
        t.campaign, trip_id, "holder_state", h.state,
        h.state == kHolderDone
            ? absl::StrCat("holder ", Quoted(h.name), " completed its ", h.round, " rounds")
            : absl::StrCat("holder ", Quoted(h.name), ": ", h.error),
        now));
  });
}

absl::StatusOr<std::vector<TripRow>> StateStore::UnfinishedTrips() {
  absl::MutexLock lock(&mu_);
  return LoadUnfinishedTrips(*db_);
}

}  // namespace gputravel
