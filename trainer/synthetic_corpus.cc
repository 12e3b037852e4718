#include "trainer/synthetic_corpus.h"

#include <algorithm>

namespace gputravel {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed, portable
// generator; fully specified, so the corpus is the same on every platform.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, n) (n <= 2^32; the modulo bias is below 2^-32).
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(Next() % n); }

 private:
  uint64_t state_;
};

// Fixed salt of the chain: changing it changes every corpus.
constexpr uint64_t kChainSalt = 0x6770757472617665ULL;  // "gputrave"

// Cumulative successor probabilities, in units of 1/100.
constexpr uint32_t kCumulative[4] = {50, 75, 90, 96};

uint32_t ClampVocab(uint32_t vocab) {
  return std::min<uint32_t>(std::max<uint32_t>(vocab, 2), 65536);
}

}  // namespace

uint16_t CorpusSuccessor(uint16_t token, int k, uint32_t vocab) {
  vocab = ClampVocab(vocab);
  uint64_t h = Mix64(kChainSalt ^ (static_cast<uint64_t>(token) * 4 +
                                   static_cast<uint64_t>(k & 3)));
  return static_cast<uint16_t>(h % vocab);
}

std::vector<uint16_t> GenerateCorpus(uint64_t seed, uint64_t tokens,
                                     uint32_t vocab) {
  vocab = ClampVocab(vocab);
  // Successor table of the fixed chain, computed once per call.
  std::vector<uint16_t> succ(static_cast<size_t>(vocab) * 4);
  for (uint32_t a = 0; a < vocab; ++a) {
    for (int k = 0; k < 4; ++k) {
      succ[a * 4 + k] = CorpusSuccessor(static_cast<uint16_t>(a), k, vocab);
    }
  }
  // The seed only drives sampling; mixing it first keeps nearby seeds apart.
  SplitMix64 rng(Mix64(seed ^ 0x5eed5eed5eed5eedULL));
  std::vector<uint16_t> out;
  out.reserve(tokens);
  uint32_t cur = rng.Below(vocab);
  for (uint64_t i = 0; i < tokens; ++i) {
    out.push_back(static_cast<uint16_t>(cur));
    uint32_t r = rng.Below(100);
    int k = 0;
    while (k < 4 && r >= kCumulative[k]) ++k;
    cur = k < 4 ? succ[cur * 4 + k] : rng.Below(vocab);
  }
  return out;
}

}  // namespace gputravel
