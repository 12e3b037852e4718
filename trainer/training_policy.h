#ifndef GPUTRAVEL_TRAINER_TRAINING_POLICY_H_
#define GPUTRAVEL_TRAINER_TRAINING_POLICY_H_

// A holder's training policy and a campaign's training terms
// (proto/training.proto): what may be done with a holder's windows and what
// may leave the orchestrator's TD about them. The agent parses its policy
// here and checks every hand-off's terms with CheckTerms/CheckWindow; the
// orchestrator checks a spec against each holder's policy with the same
// functions, fixes the terms with Strictest, and reports losses only as
// ReportedLoss lets it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/training.pb.h"

namespace gputravel {

// The policy of an agent whose configuration says nothing else: windows of
// at least 1 MiB (512 Ki llm.c tokens), trainer kinds "next-token" and "none"
// (not "external": a holder opts in to its plaintext reaching a training
// process outside the orchestrator's binary, proto/trainer.proto), a vocabulary of
// at least 256, batches of at least 4096 tokens, learning rates up to 0.1,
// losses rounded to 2 decimals and reported once per 4 trained windows.
inline constexpr uint64_t kDefaultMinWindowBytes = uint64_t{1} << 20;
inline constexpr uint32_t kDefaultMinVocab = 256;
inline constexpr uint64_t kDefaultMinBatchTokens = 4096;
inline constexpr double kDefaultMaxLearningRate = 0.1;
inline constexpr uint32_t kDefaultLossDecimals = 2;
inline constexpr uint32_t kDefaultMinWindowsPerLoss = 4;
// Limits of the fields themselves.
inline constexpr uint32_t kMaxLossDecimals = 6;
inline constexpr uint32_t kMaxWindowsPerLoss = 1000000;

v1::TrainingPolicy DefaultTrainingPolicy();

// Parses an agent's "training_policy" configuration object. Absent fields
// take the defaults above; unknown fields, wrong types and values out of
// range are errors naming `where` and the field, e.g.
//   "holder.json: training_policy: 'loss_decimals' must be 0..6".
//   min_window_bytes      integer >= 32
//   trainer_kinds         non-empty array of "next-token" | "none" | "external"
//   min_vocab             integer 2..65536
//   min_batch_tokens      integer >= 2
//   max_learning_rate     number > 0
//   loss_decimals         integer 0..6
//   min_windows_per_loss  integer 1..1000000
absl::StatusOr<v1::TrainingPolicy> ParseTrainingPolicy(const nlohmann::json& j,
                                                       const std::string& where);

// The same checks on a policy an agent reported (HolderInfo): `who` names
// the agent in the error.
absl::Status ValidateTrainingPolicy(const v1::TrainingPolicy& policy, const std::string& who);

// PermissionDenied unless `policy` allows `terms`: the trainer kind, the
// vocabulary, batch and learning rate, and reporting at least as coarse
// (no more decimals, at least as many windows per loss) and windows at least
// as long. The message names the spec field, the value and the limit, and
// `holder`, e.g. "trainer.vocab is 2; holder 'h1' allows at least 256
// (its training_policy.min_vocab)".
absl::Status CheckTerms(const v1::TrainingPolicy& policy, const v1::TrainingTerms& terms,
                        const std::string& holder);

// PermissionDenied if a window of `window_length` bytes is shorter than the
// policy's min_window_bytes.
absl::Status CheckWindow(const v1::TrainingPolicy& policy, uint64_t window_length,
                         const std::string& holder);

// `terms` with its window and reporting fields set to the strictest of
// `policies` (the largest minimum window and windows per loss, the fewest
// decimals); the trainer fields are kept. With no policies: the defaults.
v1::TrainingTerms Strictest(v1::TrainingTerms terms,
                            const std::vector<v1::TrainingPolicy>& policies);

// `loss` rounded half away from zero to `decimals` decimals.
double RoundLoss(double loss, uint32_t decimals);

// What may be reported for a block of consecutive trained windows' losses:
// their mean, rounded to terms.loss_decimals, once the block holds at least
// terms.min_windows_per_loss windows; nullopt before.
std::optional<double> ReportedLoss(const std::vector<double>& block_losses,
                                   const v1::TrainingTerms& terms);

// One line for logs and errors: "next-token vocab 512 dim 32 lr 0.05 batch
// 65536 seed 1; windows >= 1048576 B; loss per 4 windows, 2 decimals".
std::string DescribeTerms(const v1::TrainingTerms& terms);

}  // namespace gputravel

#endif  // GPUTRAVEL_TRAINER_TRAINING_POLICY_H_
