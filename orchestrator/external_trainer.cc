#include "orchestrator/external_trainer.h"

#include "orchestrator/trip_steps.h"
#include "proto/trainer.pb.h"

namespace gputravel {

absl::StatusOr<ResumePoint> ExternalResumePoint(StateStore* store, const std::string& campaign) {
  auto checkpoint = store->GetCheckpoint(campaign);
  if (!checkpoint.ok()) return checkpoint.status();
  ResumePoint p;
  if (checkpoint->empty()) return p;
  v1::Resume r;
  if (!r.ParseFromString(*checkpoint)) {
    return absl::DataLossError("campaign '" + campaign + "': its checkpoint is not an "
                               "external trainer's resume point");
  }
  p.committed_trip = r.committed_trip();
  p.checkpoint_sha256 = r.checkpoint_sha256();
  p.tokens_committed = r.tokens_committed();
  return p;
}

absl::StatusOr<std::optional<ResumePoint>> CommittedThrough(StateStore* store,
                                                            const std::string& campaign,
                                                            uint64_t trip) {
  auto trips = store->ListTrips(campaign);
  if (!trips.ok()) return trips.status();
  ResumePoint p;
  bool found = false;
  for (const TripRow& t : *trips) {
    if (t.id > trip || !t.trained || t.trainer_checkpoint_sha256.empty()) continue;
    p.tokens_committed += t.trainer_tokens;
    if (t.id == trip) {
      found = true;
      p.committed_trip = t.id;
      p.checkpoint_sha256 = t.trainer_checkpoint_sha256;
    }
  }
  if (!found) return std::optional<ResumePoint>();
  return std::optional<ResumePoint>(p);
}

absl::StatusOr<std::shared_ptr<RemoteTrainer>> MakeRemoteTrainer(
    StateStore* store, const CampaignSpec& spec, const v1::TrainingTerms& terms) {
  auto resume = ExternalResumePoint(store, spec.name);
  if (!resume.ok()) return resume.status();
  RemoteTrainer::Options o;
  o.campaign = spec.name;
  o.identity = spec.trainer.identity;
  o.batch_tokens = terms.batch_tokens();
  o.vocab = terms.vocab();
  o.window_timeout = absl::Seconds(spec.trainer.timeout_seconds);
  o.release_timeout = absl::Seconds(spec.trainer.release_timeout_seconds);
  const std::string name = spec.name;
  o.committed = [store, name](uint64_t trip) { return CommittedThrough(store, name, trip); };
  return std::make_shared<RemoteTrainer>(std::move(o), *resume);
}

absl::Status TrainerStreamEnd(const std::string& campaign, bool orchestrator_stopping,
                              const absl::StatusOr<CampaignRow>& row) {
  if (orchestrator_stopping) return absl::CancelledError("the orchestrator is shutting down");
  if (!row.ok()) return row.status();
  if (row->state == kCampaignCompleted) return absl::OkStatus();
  return absl::FailedPreconditionError("campaign '" + campaign + "' is " + row->state +
                                       (row->error.empty() ? "" : ": " + row->error));
}

}  // namespace gputravel
