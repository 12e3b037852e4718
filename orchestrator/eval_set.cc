#include "orchestrator/eval_set.h"

#include <algorithm>

#include "holder_agent/dataset.h"

namespace gputravel {

absl::StatusOr<std::vector<uint16_t>> LoadEvalTokens(const std::string& path) {
  auto dataset = Dataset::Open(path, "auto");
  if (!dataset.ok()) {
    return absl::Status(dataset.status().code(),
                        "eval_tokens: " + std::string(dataset.status().message()));
  }
  const size_t n = static_cast<size_t>(
      std::min<uint64_t>((*dataset)->payload_bytes() / 2, kMaxEvalTokens));
  if (n < 2) {
    return absl::InvalidArgumentError("eval_tokens: " + path +
                                      " holds fewer than 2 tokens: nothing to evaluate on");
  }
  std::vector<uint8_t> bytes(n * 2);
  absl::Status read = (*dataset)->Read(0, bytes.data(), bytes.size());
  if (!read.ok()) {
    return absl::Status(read.code(), "eval_tokens: " + std::string(read.message()));
  }
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
  }
  return tokens;
}

}  // namespace gputravel
