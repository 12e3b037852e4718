#ifndef GPUTRAVEL_ORCHESTRATOR_EVAL_SET_H_
#define GPUTRAVEL_ORCHESTRATOR_EVAL_SET_H_

// The orchestrator's own evaluation set: a fixed token sequence kept inside
// its TD, on which the held-out loss is measured after each trained window.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gputravel {

// Tokens beyond this are not read: the held-out loss costs one evaluation
// of at most this many tokens per trip.
inline constexpr size_t kMaxEvalTokens = 65536;

// Reads the first min(kMaxEvalTokens, all) tokens of an llm.c token shard or
// a raw file of uint16 little-endian tokens (format "auto",
// holder_agent/dataset.h). Errors name the file; fewer than 2 tokens is an
// error (no pair to predict).
absl::StatusOr<std::vector<uint16_t>> LoadEvalTokens(const std::string& path);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_EVAL_SET_H_
