#include "orchestrator/campaign_terms.h"

#include "absl/strings/str_cat.h"
#include "trainer/training_policy.h"

namespace gputravel {

v1::TrainingTerms TrainerTerms(const TrainerSpec& trainer) {
  v1::TrainingTerms t;
  t.set_trainer_kind(trainer.kind);
  t.set_vocab(trainer.vocab);
  t.set_batch_tokens(trainer.batch_tokens);
  // An external trainer's model is its own: dim, learning rate and seed
  // stay 0 (the built-in model's terms do not bind it).
  if (trainer.kind == "external") return t;
  t.set_dim(trainer.dim);
  t.set_learning_rate(trainer.learning_rate);
  t.set_seed(trainer.seed);
  return t;
}

absl::StatusOr<CampaignTerms> DecideCampaignTerms(const CampaignSpec& spec,
                                                  const std::vector<HolderTermsInput>& holders) {
  std::vector<v1::TrainingPolicy> policies;
  for (size_t i = 0; i < holders.size(); ++i) {
    const std::string who = absl::StrCat("holders[", i, "]: holder '", holders[i].name, "'");
    absl::Status valid = ValidateTrainingPolicy(holders[i].policy, who);
    if (!valid.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          valid.message(), " (the agent reported a policy this orchestrator cannot apply)"));
    }
    policies.push_back(holders[i].policy);
  }
  CampaignTerms out;
  out.terms = Strictest(TrainerTerms(spec.trainer), policies);
  for (size_t i = 0; i < holders.size(); ++i) {
    const HolderTermsInput& h = holders[i];
    const std::string at = absl::StrCat("holders[", i, "]: ");
    absl::Status allowed = CheckTerms(h.policy, out.terms, h.name);
    if (!allowed.ok()) {
      return absl::FailedPreconditionError(at + std::string(allowed.message()));
    }
    if (spec.buffer_bytes < h.policy.min_window_bytes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          at, "buffer_bytes is ", spec.buffer_bytes, "; holder '", h.name,
          "' provisions windows of at least ", h.policy.min_window_bytes(),
          " bytes (its training_policy.min_window_bytes)"));
    }
    if (h.dataset_bytes < out.terms.min_window_bytes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          at, "holder '", h.name, "' serves ", h.dataset_bytes,
          " bytes, less than the campaign's minimum window of ", out.terms.min_window_bytes(),
          " bytes (the strictest training_policy.min_window_bytes of its holders)"));
    }
    // The last window of a pass is whatever remains; one shorter than the
    // minimum would let a loss say more about each of its tokens.
    const uint64_t tail = h.dataset_bytes % spec.buffer_bytes;
    const uint64_t dropped = tail != 0 && tail < out.terms.min_window_bytes() ? tail : 0;
    out.usable_bytes.push_back(h.dataset_bytes - dropped);
    out.dropped_tail_bytes.push_back(dropped);
  }
  return out;
}

}  // namespace gputravel
