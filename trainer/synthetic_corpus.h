#ifndef GPUTRAVEL_TRAINER_SYNTHETIC_CORPUS_H_
#define GPUTRAVEL_TRAINER_SYNTHETIC_CORPUS_H_

#include <cstdint>
#include <vector>

namespace gputravel {

// Deterministic llm.c-style token streams with learnable structure, for the
// demo and the tests (write them to disk with holder_agent/dataset.h's
// WriteLlmcShard).
//
// The stream is a walk on a fixed sparse Markov chain over [0, vocab): every
// token a has four likely successors, derived from a fixed hash of (a, k) and
// independent of `seed`, taken with probabilities 0.50, 0.25, 0.15 and 0.06;
// with the remaining 0.04 the next token is uniform over [0, vocab). The chain
// is the same for every seed; `seed` only changes the sampling (start token
// and choices). So different holders' corpora share their structure, and a
// model trained on one holder's data already predicts another's. The entropy
// rate is about 1.5 nats per token for vocab = 512, against ln(512) = 6.24 for
// an untrained model.
//
// Every token id is < vocab (so < 50257, a valid GPT-2 id, when vocab <=
// 50257). `vocab` is clamped to [2, 65536]. Same (seed, tokens, vocab), same
// output, on every platform.
std::vector<uint16_t> GenerateCorpus(uint64_t seed, uint64_t tokens,
                                     uint32_t vocab = 512);

// The k-th (k in 0..3) likely successor of `token` in the chain that
// GenerateCorpus walks, in order of decreasing probability (for tests and
// for explaining the demo). Requires token < vocab.
uint16_t CorpusSuccessor(uint16_t token, int k, uint32_t vocab = 512);

}  // namespace gputravel

#endif  // GPUTRAVEL_TRAINER_SYNTHETIC_CORPUS_H_
