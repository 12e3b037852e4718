#include "trainer/next_token_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gputravel {
namespace {

// Adam constants (Kingma & Ba defaults).
constexpr float kBeta1 = 0.9f;
constexpr float kBeta2 = 0.999f;
constexpr float kEpsilon = 1e-8f;

// Checkpoint layout, all little-endian:
//   magic[8] "GTNTMDL\n", u32 version,
//   u32 vocab, u32 dim, f32 learning_rate, u64 seed,
//   u64 tokens_trained, u64 steps,
//   f32 E[vocab*dim], W[dim*vocab], b[vocab],
//       mE[vocab*dim], vE[vocab*dim], mW[dim*vocab], vW[dim*vocab],
//       mb[vocab], vb[vocab],
//   u64 FNV-1a-64 of every preceding byte.
constexpr char kMagic[8] = {'G', 'T', 'N', 'T', 'M', 'D', 'L', '\n'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 4 + 4 + 8 + 8 + 8;
constexpr size_t kChecksumBytes = 8;

uint64_t Fnv1a64(absl::string_view data) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 4);
}

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}

void PutF32s(std::string* out, const std::vector<float>& v) {
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    PutU32(out, u);
  }
}

// Sequential little-endian reader over a buffer whose length was checked.
class Reader {
 public:
  explicit Reader(const char* p) : p_(reinterpret_cast<const unsigned char*>(p)) {}
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p_[i]) << (8 * i);
    p_ += 4;
    return v;
  }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += 8;
    return v;
  }
  float F32() {
    uint32_t u = U32();
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // Reads v->size() floats; false if any is not finite.
  bool F32s(std::vector<float>* v) {
    bool finite = true;
    for (float& f : *v) {
      f = F32();
      finite &= std::isfinite(f);
    }
    return finite;
  }

 private:
  const unsigned char* p_;
};

// Dot product with eight independent partial sums: a fixed summation order
// (deterministic) that the compiler can vectorise without -ffast-math.
float Dot(const float* __restrict a, const float* __restrict b, uint32_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) acc[i % 8] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
         ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void AdamUpdate(float lr, float bias1, float bias2, const float* g, float* p,
                float* m, float* v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    m[i] = kBeta1 * m[i] + (1 - kBeta1) * g[i];
    v[i] = kBeta2 * v[i] + (1 - kBeta2) * g[i] * g[i];
    p[i] -= lr * (m[i] / bias1) / (std::sqrt(v[i] / bias2) + kEpsilon);
  }
}

}  // namespace

absl::Status ValidateNextTokenModelConfig(const NextTokenModelConfig& config) {
  if (config.vocab < 2 || config.vocab > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer.vocab: must be 2..65536 (got ", config.vocab, ")"));
  }
  if (config.dim < 1 || config.dim > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer.dim: must be 1..1024 (got ", config.dim, ")"));
  }
  if (!std::isfinite(config.learning_rate) || config.learning_rate <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer.learning_rate: must be a finite number > 0 (got ",
                     config.learning_rate, "); 0.05 works for the defaults"));
  }
  return absl::OkStatus();
}

NextTokenModel::NextTokenModel(const NextTokenModelConfig& config)
    : config_(config) {
  const size_t vd = static_cast<size_t>(config.vocab) * config.dim;
  e_.resize(vd);
  w_.assign(vd, 0.0f);
  b_.assign(config.vocab, 0.0f);
  me_.assign(vd, 0.0f);
  ve_.assign(vd, 0.0f);
  mw_.assign(vd, 0.0f);
  vw_.assign(vd, 0.0f);
  mb_.assign(config.vocab, 0.0f);
  vb_.assign(config.vocab, 0.0f);
}

absl::StatusOr<NextTokenModel> NextTokenModel::Create(
    const NextTokenModelConfig& config) {
  absl::Status s = ValidateNextTokenModelConfig(config);
  if (!s.ok()) return s;
  NextTokenModel model(config);
  // SplitMix64 stream: portable, so the same seed gives the same model
  // everywhere.
  uint64_t state = config.seed;
  const float scale = 1.0f / std::sqrt(static_cast<float>(config.dim));
  for (float& e : model.e_) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    float u = static_cast<float>(z >> 40) / static_cast<float>(1 << 24);  // [0,1)
    e = (2 * u - 1) * scale;
  }
  return model;
}

void NextTokenModel::GroupPairs(const uint16_t* tokens, size_t n,
                                std::vector<uint32_t>* row_start,
                                std::vector<uint32_t>* targets) const {
  // Counting sort of the pairs by input bucket: stable, so deterministic.
  const uint32_t vocab = config_.vocab;
  const size_t pairs = n - 1;
  row_start->assign(vocab + 1, 0);
  for (size_t i = 0; i < pairs; ++i) ++(*row_start)[tokens[i] % vocab + 1];
  for (uint32_t v = 0; v < vocab; ++v) (*row_start)[v + 1] += (*row_start)[v];
  std::vector<uint32_t> fill(row_start->begin(), row_start->end() - 1);
  targets->resize(pairs);
  for (size_t i = 0; i < pairs; ++i) {
    (*targets)[fill[tokens[i] % vocab]++] = tokens[i + 1] % vocab;
  }
}

double NextTokenModel::Forward(uint32_t x, float* logits, float* unnormalised,
                               double* sum_out) const {
  const uint32_t vocab = config_.vocab, dim = config_.dim;
  const float* __restrict h = &e_[static_cast<size_t>(x) * dim];
  float* __restrict out = logits;
  std::memcpy(out, b_.data(), vocab * sizeof(float));
  for (uint32_t d = 0; d < dim; ++d) {
    const float hd = h[d];
    const float* __restrict w = &w_[static_cast<size_t>(d) * vocab];
    for (uint32_t v = 0; v < vocab; ++v) out[v] += hd * w[v];
  }
  const float mx = *std::max_element(out, out + vocab);
  double sum = 0;
  for (uint32_t v = 0; v < vocab; ++v) {
    const float p = std::exp(out[v] - mx);
    if (unnormalised != nullptr) unnormalised[v] = p;
    sum += p;
  }
  *sum_out = sum;
  return mx + std::log(sum);
}

float NextTokenModel::Evaluate(const uint16_t* tokens, size_t n) const {
  if (tokens == nullptr || n < 2) return 0.0f;
  // n - 1 pairs are grouped with 32-bit offsets: evaluate huge inputs in
  // pieces (sharing the boundary token) and weight by pair count.
  constexpr size_t kMaxPairs = size_t{1} << 30;
  if (n - 1 > kMaxPairs) {
    double total = 0;
    for (size_t start = 0; start + 1 < n; start += kMaxPairs) {
      size_t len = std::min(kMaxPairs + 1, n - start);
      total += static_cast<double>(Evaluate(tokens + start, len)) * (len - 1);
    }
    return static_cast<float>(total / (n - 1));
  }
  std::vector<uint32_t> row_start, targets;
  GroupPairs(tokens, n, &row_start, &targets);
  std::vector<float> logits(config_.vocab);
  double loss = 0;
  for (uint32_t x = 0; x < config_.vocab; ++x) {
    const uint32_t begin = row_start[x], end = row_start[x + 1];
    if (begin == end) continue;
    double sum;
    const double lse = Forward(x, logits.data(), nullptr, &sum);
    loss += lse * (end - begin);
    for (uint32_t j = begin; j < end; ++j) loss -= logits[targets[j]];
  }
  return static_cast<float>(loss / (n - 1));
}

float NextTokenModel::TrainBatch(const uint16_t* tokens, size_t n) {
  if (tokens == nullptr || n < 2) return 0.0f;
  constexpr size_t kMaxPairs = size_t{1} << 30;
  if (n - 1 > kMaxPairs) {
    // Same 32-bit limit as Evaluate: one step per piece.
    double total = 0;
    for (size_t start = 0; start + 1 < n; start += kMaxPairs) {
      size_t len = std::min(kMaxPairs + 1, n - start);
      total += static_cast<double>(TrainBatch(tokens + start, len)) * (len - 1);
    }
    return static_cast<float>(total / (n - 1));
  }
  const uint32_t vocab = config_.vocab, dim = config_.dim;
  const size_t vd = static_cast<size_t>(vocab) * dim;
  const size_t pairs = n - 1;
  const float inv_pairs = 1.0f / static_cast<float>(pairs);

  std::vector<uint32_t> row_start, targets;
  GroupPairs(tokens, n, &row_start, &targets);

  // Gradients of the batch's MEAN loss.
  std::vector<float> ge(vd, 0.0f), gw(vd, 0.0f), gb(vocab, 0.0f);
  std::vector<float> logits(vocab), g(vocab);
  double loss = 0;
  for (uint32_t x = 0; x < vocab; ++x) {
    const uint32_t begin = row_start[x], end = row_start[x + 1];
    if (begin == end) continue;
    const uint32_t count = end - begin;
    double sum;
    const double lse = Forward(x, logits.data(), g.data(), &sum);
    loss += lse * count;
    for (uint32_t j = begin; j < end; ++j) loss -= logits[targets[j]];

    // dLoss/dlogits summed over this bucket's pairs, scaled to the mean:
    // (count · softmax - one-hot(targets)) / pairs.
    float* __restrict gv = g.data();
    const float scale = static_cast<float>(count / sum) * inv_pairs;
    for (uint32_t v = 0; v < vocab; ++v) gv[v] *= scale;
    for (uint32_t j = begin; j < end; ++j) gv[targets[j]] -= inv_pairs;

    const float* __restrict h = &e_[static_cast<size_t>(x) * dim];
    float* __restrict gh = &ge[static_cast<size_t>(x) * dim];
    for (uint32_t d = 0; d < dim; ++d) {
      const float* __restrict w = &w_[static_cast<size_t>(d) * vocab];
      float* __restrict gwd = &gw[static_cast<size_t>(d) * vocab];
      const float hd = h[d];
      for (uint32_t v = 0; v < vocab; ++v) gwd[v] += hd * gv[v];
      gh[d] = Dot(w, gv, vocab);
    }
    for (uint32_t v = 0; v < vocab; ++v) gb[v] += gv[v];
  }

  ++steps_;
  const float bias1 = 1.0f - static_cast<float>(std::pow(kBeta1, steps_));
  const float bias2 = 1.0f - static_cast<float>(std::pow(kBeta2, steps_));
  const float lr = config_.learning_rate;
  AdamUpdate(lr, bias1, bias2, ge.data(), e_.data(), me_.data(), ve_.data(), vd);
  AdamUpdate(lr, bias1, bias2, gw.data(), w_.data(), mw_.data(), vw_.data(), vd);
  AdamUpdate(lr, bias1, bias2, gb.data(), b_.data(), mb_.data(), vb_.data(), vocab);
  tokens_trained_ += pairs;
  return static_cast<float>(loss / pairs);
}

uint64_t NextTokenModel::CheckpointBytes(uint32_t vocab, uint32_t dim) {
  const uint64_t vd = uint64_t{vocab} * dim;
  return kHeaderBytes + (6 * vd + 3 * uint64_t{vocab}) * 4 + kChecksumBytes;
}

std::string NextTokenModel::Serialize() const {
  std::string out;
  out.reserve(CheckpointBytes(config_.vocab, config_.dim));
  out.append(kMagic, sizeof(kMagic));
  PutU32(&out, kVersion);
  PutU32(&out, config_.vocab);
  PutU32(&out, config_.dim);
  uint32_t lr_bits;
  std::memcpy(&lr_bits, &config_.learning_rate, 4);
  PutU32(&out, lr_bits);
  PutU64(&out, config_.seed);
  PutU64(&out, tokens_trained_);
  PutU64(&out, steps_);
  for (const std::vector<float>* v : {&e_, &w_, &b_, &me_, &ve_, &mw_, &vw_, &mb_, &vb_}) {
    PutF32s(&out, *v);
  }
  PutU64(&out, Fnv1a64(out));
  return out;
}

absl::StatusOr<NextTokenModel> NextTokenModel::Deserialize(absl::string_view data) {
  if (data.size() < sizeof(kMagic) ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        "trainer checkpoint: bad magic (not a NextTokenModel checkpoint)");
  }
  if (data.size() < kHeaderBytes + kChecksumBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer checkpoint: truncated (", data.size(),
        " bytes, shorter than the ", kHeaderBytes + kChecksumBytes,
        "-byte header)"));
  }
  Reader r(data.data() + sizeof(kMagic));
  const uint32_t version = r.U32();
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer checkpoint: version ", version,
        " is not supported (this build reads version ", kVersion, ")"));
  }
  NextTokenModelConfig config;
  config.vocab = r.U32();
  config.dim = r.U32();
  config.learning_rate = r.F32();
  config.seed = r.U64();
  absl::Status valid = ValidateNextTokenModelConfig(config);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer checkpoint: invalid config: ", valid.message()));
  }
  const size_t vd = static_cast<size_t>(config.vocab) * config.dim;
  const size_t expected =
      kHeaderBytes + (6 * vd + 3 * size_t{config.vocab}) * 4 + kChecksumBytes;
  if (data.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer checkpoint: ", data.size() < expected ? "truncated" : "too long",
        " (", data.size(), " bytes; vocab ", config.vocab, " dim ", config.dim,
        " needs ", expected, ")"));
  }
  Reader tail(data.data() + expected - kChecksumBytes);
  if (tail.U64() != Fnv1a64(data.substr(0, expected - kChecksumBytes))) {
    return absl::DataLossError(
        "trainer checkpoint: checksum mismatch (corrupted); discard it and "
        "restart training from scratch or from an older checkpoint");
  }
  NextTokenModel model(config);
  model.tokens_trained_ = r.U64();
  model.steps_ = r.U64();
  bool finite = true;
  for (std::vector<float>* v : {&model.e_, &model.w_, &model.b_, &model.me_,
                                &model.ve_, &model.mw_, &model.vw_, &model.mb_,
                                &model.vb_}) {
    finite &= r.F32s(v);
  }
  if (!finite) {
    return absl::InvalidArgumentError(
        "trainer checkpoint: holds non-finite weights (training diverged "
        "before it was saved; lower trainer.learning_rate and retrain)");
  }
  return model;
}

}  // namespace gputravel
