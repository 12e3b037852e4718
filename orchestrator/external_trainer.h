#ifndef GPUTRAVEL_ORCHESTRATOR_EXTERNAL_TRAINER_H_
#define GPUTRAVEL_ORCHESTRATOR_EXTERNAL_TRAINER_H_

// A campaign of trainer kind "external" as the campaign engine runs it: its
// RemoteTrainer, set up from the campaign's spec, terms and resume point
// (its sealed checkpoint: a serialized v1::Resume), and how the attached
// trainer's stream ends when the campaign stops running.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/campaign_spec.h"
#include "orchestrator/state_store.h"
#include "proto/training.pb.h"
#include "trainer/remote_trainer.h"

namespace gputravel {

// The campaign's resume point: none before its first committed window.
// DATA_LOSS (from the store, or for a checkpoint that is not a resume
// point) names the campaign.
absl::StatusOr<ResumePoint> ExternalResumePoint(StateStore* store, const std::string& campaign);

// The resume point `trip` made, if it is a committed window of `campaign`.
absl::StatusOr<std::optional<ResumePoint>> CommittedThrough(StateStore* store,
                                                            const std::string& campaign,
                                                            uint64_t trip);

// The campaign's RemoteTrainer, continuing from its resume point.
absl::StatusOr<std::shared_ptr<RemoteTrainer>> MakeRemoteTrainer(StateStore* store,
                                                                 const CampaignSpec& spec,
                                                                 const v1::TrainingTerms& terms);

// Why the trainer's stream ends when the campaign stops running: OK once it
// completed, CANCELLED when the orchestrator stops, else its state and
// error (the trainer attaches again for its next run).
absl::Status TrainerStreamEnd(const std::string& campaign, bool orchestrator_stopping,
                              const absl::StatusOr<CampaignRow>& row);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_EXTERNAL_TRAINER_H_
