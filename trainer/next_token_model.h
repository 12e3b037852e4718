#ifndef GPUTRAVEL_TRAINER_NEXT_TOKEN_MODEL_H_
#define GPUTRAVEL_TRAINER_NEXT_TOKEN_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gputravel {

struct NextTokenModelConfig {
  // Token t is modelled as bucket t % vocab (2..65536).
  uint32_t vocab = 512;
  // Embedding width (1..1024).
  uint32_t dim = 32;
  // Adam step size (finite, > 0). Measured on the demo's six holders x two
  // rounds (orchestrator/campaign_training_test.cc): 0.05 settles at 1.60
  // nats; 0.5 stalls near 1.87 and then blows up to 41.6 (Adam moves every
  // weight by about the step size per step, whatever the gradient's size).
  float learning_rate = 0.05f;
  // Seeds the embedding initialisation; same seed, same model.
  uint64_t seed = 1;
};

// Checks every field; the error names the field ("trainer.vocab: ...").
absl::Status ValidateNextTokenModelConfig(const NextTokenModelConfig& config);

// The built-in trainer's model: a small bigram language model that predicts
// token i+1 from token i, so the demo shows a real loss falling as the
// travelling GPU delivers data.
//
//   logits = E[x] · W + b       E: [vocab][dim], W: [dim][vocab], b: [vocab]
//   loss   = softmax cross-entropy (nats) of the next token's bucket
//
// Initialisation: E uniform in ±1/sqrt(dim) from `seed`; W = 0, b = 0, so an
// untrained model's loss is exactly ln(vocab).
//
// Training: each TrainBatch is ONE full-batch Adam step (beta1 0.9, beta2
// 0.999, eps 1e-8, no weight decay) on the batch's mean loss. All pairs that
// share an input bucket share their forward pass, so a step costs
// O(n + 3·U·vocab·dim) with U <= vocab the number of distinct input buckets in
// the batch: with the default config about 10 ms whatever the batch size, and
// a 2M-token window in 64K-token batches trains in a fraction of a second.
// Plain SGD was tried and rejected: on a full batch each embedding row and
// output column sees only ~1/vocab of the gradient and needed thousands of
// steps; Adam's per-parameter scaling reaches near the corpus entropy in a few
// dozen steps. Everything is single-threaded with a fixed order of operations,
// so training is deterministic.
//
// Memory: 24·vocab·dim + 12·vocab bytes; checkpoints are as large (weights plus Adam moments).
// Not thread-safe; BuiltinTrainer serialises access.
class NextTokenModel {
 public:
  static absl::StatusOr<NextTokenModel> Create(const NextTokenModelConfig& config);

  NextTokenModel(NextTokenModel&&) = default;
  NextTokenModel& operator=(NextTokenModel&&) = default;
  NextTokenModel(const NextTokenModel&) = default;
  NextTokenModel& operator=(const NextTokenModel&) = default;

  // One Adam step on the n-1 pairs (tokens[i], tokens[i+1]). Returns the mean
  // cross-entropy (nats) of those pairs BEFORE the update. n < 2: returns 0
  // and changes nothing.
  float TrainBatch(const uint16_t* tokens, size_t n);

  // Mean cross-entropy (nats) of the n-1 pairs, without training. n < 2: 0.
  float Evaluate(const uint16_t* tokens, size_t n) const;

  // Checkpoint for crash recovery (stored in SQLite by the orchestrator):
  // versioned little-endian binary with a magic, the config, the counters,
  // weights and Adam moments, and a trailing FNV-1a-64 checksum against
  // accidental corruption (not a MAC: integrity against tampering is the
  // store's job). Deserialize(Serialize()) trains and evaluates identically.
  std::string Serialize() const;
  // Serialize()'s size for a model of `vocab` x `dim`: 24·vocab·dim +
  // 12·vocab bytes plus a 56-byte header and trailer.
  static uint64_t CheckpointBytes(uint32_t vocab, uint32_t dim);
  // Rejects wrong magic, unsupported versions, invalid configs, truncated or
  // over-long input, checksum mismatches and non-finite weights, with an error
  // that says which.
  static absl::StatusOr<NextTokenModel> Deserialize(absl::string_view data);

  const NextTokenModelConfig& config() const { return config_; }
  // Number of next-token predictions (pairs) trained on so far.
  uint64_t tokens_trained() const { return tokens_trained_; }
  // Number of optimiser steps (TrainBatch calls with n >= 2) so far.
  uint64_t steps() const { return steps_; }

 private:
  explicit NextTokenModel(const NextTokenModelConfig& config);

  // Groups the n-1 pairs by input bucket. Fills `row_start` (vocab + 1
  // offsets) and `targets` (target buckets, grouped by input bucket, in
  // stream order within a group).
  void GroupPairs(const uint16_t* tokens, size_t n,
                  std::vector<uint32_t>* row_start,
                  std::vector<uint32_t>* targets) const;
  // Writes logits[v] = b[v] + sum_d E[x][d] * W[d][v] (vocab entries) and
  // returns their log-sum-exp. Also sets *sum to sum_v exp(logit_v - max)
  // and, if `unnormalised` is not null, writes those terms there (the
  // softmax times *sum).
  double Forward(uint32_t x, float* logits, float* unnormalised,
                 double* sum) const;

  NextTokenModelConfig config_;
  uint64_t tokens_trained_ = 0;
  uint64_t steps_ = 0;
  // Parameters and their Adam first (m) and second (v) moments.
  std::vector<float> e_, w_, b_;
  std::vector<float> me_, ve_, mw_, vw_, mb_, vb_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_TRAINER_NEXT_TOKEN_MODEL_H_
