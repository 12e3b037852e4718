#ifndef GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_TERMS_H_
#define GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_TERMS_H_

// A campaign's training terms (proto/training.proto), fixed at create from
// its spec and the training policies its holders report: the spec must lie
// inside every holder's policy, the terms take the strictest reporting and
// window of them, and each holder's dataset is cut to whole windows the
// terms allow (a tail shorter than the minimum window is not provisioned).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/campaign_spec.h"
#include "proto/training.pb.h"

namespace gputravel {

// What one holder reported at create (HolderInfo).
struct HolderTermsInput {
  std::string name;
  uint64_t dataset_bytes = 0;
  v1::TrainingPolicy policy;
};

struct CampaignTerms {
  v1::TrainingTerms terms;
  // Per holder, in spec order: the bytes the campaign provisions (the
  // dataset without a tail shorter than terms.min_window_bytes) and that
  // tail's length (0 if none).
  std::vector<uint64_t> usable_bytes;
  std::vector<uint64_t> dropped_tail_bytes;
};

// The spec's trainer as terms (reporting fields unset).
v1::TrainingTerms TrainerTerms(const TrainerSpec& trainer);

// FailedPrecondition naming "holders[i]" and the holder when the spec lies
// outside that holder's policy (trainer kind, vocab, batch, learning rate,
// buffer_bytes below its minimum window), when a holder's reported policy is
// malformed, or when a dataset is shorter than the minimum window.
absl::StatusOr<CampaignTerms> DecideCampaignTerms(const CampaignSpec& spec,
                                                  const std::vector<HolderTermsInput>& holders);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_TERMS_H_
