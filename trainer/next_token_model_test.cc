#include "trainer/next_token_model.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/synthetic_corpus.h"

namespace gputravel {
namespace {

NextTokenModel MakeModel(NextTokenModelConfig config = {}) {
  absl::StatusOr<NextTokenModel> m = NextTokenModel::Create(config);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// Trains on `tokens` in consecutive batches of `batch` tokens sharing their
// boundary token, as DataLoader delivers them; returns {first, last} loss.
std::pair<float, float> Train(NextTokenModel* m, const std::vector<uint16_t>& tokens,
                              size_t batch) {
  float first = -1, last = -1;
  for (size_t begin = 0; begin + 1 < tokens.size(); begin += batch) {
    size_t len = std::min(batch + 1, tokens.size() - begin);
    last = m->TrainBatch(&tokens[begin], len);
    if (first < 0) first = last;
  }
  return {first, last};
}

void ExpectInvalid(NextTokenModelConfig config, const std::string& field) {
  absl::StatusOr<NextTokenModel> m = NextTokenModel::Create(config);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(field), std::string::npos) << m.status();
}

TEST(NextTokenModelTest, RejectsBadVocab) {
  for (uint32_t vocab : {0u, 1u, 65537u}) {
    NextTokenModelConfig c;
    c.vocab = vocab;
    ExpectInvalid(c, "trainer.vocab: must be 2..65536");
  }
}

TEST(NextTokenModelTest, RejectsBadDim) {
  for (uint32_t dim : {0u, 1025u}) {
    NextTokenModelConfig c;
    c.dim = dim;
    ExpectInvalid(c, "trainer.dim: must be 1..1024");
  }
}

TEST(NextTokenModelTest, RejectsBadLearningRate) {
  for (float lr : {0.0f, -0.1f, std::numeric_limits<float>::quiet_NaN(),
                   std::numeric_limits<float>::infinity()}) {
    NextTokenModelConfig c;
    c.learning_rate = lr;
    ExpectInvalid(c, "trainer.learning_rate");
  }
}

TEST(NextTokenModelTest, AcceptsBoundaries) {
  NextTokenModelConfig c;
  c.vocab = 2;
  c.dim = 1;
  EXPECT_TRUE(NextTokenModel::Create(c).ok());
}

TEST(NextTokenModelTest, UntrainedLossIsLnVocab) {
  NextTokenModel m = MakeModel();
  std::vector<uint16_t> t = GenerateCorpus(1, 5000);
  EXPECT_NEAR(m.Evaluate(t.data(), t.size()), std::log(512.0), 1e-4);
}

TEST(NextTokenModelTest, ShortBatchesDoNothing) {
  NextTokenModel m = MakeModel();
  const std::string before = m.Serialize();
  uint16_t one = 7;
  EXPECT_EQ(m.TrainBatch(nullptr, 0), 0.0f);
  EXPECT_EQ(m.TrainBatch(&one, 1), 0.0f);
  EXPECT_EQ(m.Evaluate(&one, 1), 0.0f);
  EXPECT_EQ(m.tokens_trained(), 0u);
  EXPECT_EQ(m.Serialize(), before);
}

TEST(NextTokenModelTest, TokensAreBucketedModuloVocab) {
  NextTokenModel m = MakeModel();
  std::vector<uint16_t> t = GenerateCorpus(2, 20000);
  Train(&m, t, 4096);
  std::vector<uint16_t> shifted(t);
  for (uint16_t& x : shifted) x = static_cast<uint16_t>(x + 512 * 97);  // < 50257
  EXPECT_EQ(m.Evaluate(t.data(), t.size()),
            m.Evaluate(shifted.data(), shifted.size()));
}

TEST(NextTokenModelTest, LossFallsAndGeneralisesToOtherHolders) {
  NextTokenModel m = MakeModel();
  std::vector<uint16_t> holder_a = GenerateCorpus(7, 300000);
  std::vector<uint16_t> holder_b = GenerateCorpus(99, 50000);  // held out
  const float held_before = m.Evaluate(holder_b.data(), holder_b.size());
  auto [first, last] = Train(&m, holder_a, 4096);
  const float held_after = m.Evaluate(holder_b.data(), holder_b.size());
  // Untrained: ln(512) = 6.24; the chain's entropy rate is about 1.5.
  EXPECT_NEAR(first, std::log(512.0f), 1e-3);
  EXPECT_LT(last, 0.5f * first);
  EXPECT_LT(held_after, 0.5f * held_before);
  EXPECT_EQ(m.tokens_trained(), holder_a.size() - 1);
  EXPECT_EQ(m.steps(), (holder_a.size() - 1 + 4095) / 4096);
  std::printf("loss: first batch %.3f, last batch %.3f; held-out %.3f -> %.3f\n",
              first, last, held_before, held_after);
}

TEST(NextTokenModelTest, TrainingIsDeterministic) {
  std::vector<uint16_t> t = GenerateCorpus(3, 40000);
  NextTokenModel a = MakeModel(), b = MakeModel();
  Train(&a, t, 8192);
  Train(&b, t, 8192);
  EXPECT_EQ(a.Serialize(), b.Serialize());
  NextTokenModelConfig other_seed;
  other_seed.seed = 2;
  EXPECT_NE(MakeModel(other_seed).Serialize(), MakeModel().Serialize());
}

TEST(NextTokenModelTest, CheckpointBytesIsTheSerializedSize) {
  for (auto [vocab, dim] : {std::pair<uint32_t, uint32_t>{300, 16}, {2, 1}, {512, 32}}) {
    NextTokenModelConfig c;
    c.vocab = vocab;
    c.dim = dim;
    EXPECT_EQ(MakeModel(c).Serialize().size(), NextTokenModel::CheckpointBytes(vocab, dim))
        << vocab << " x " << dim;
  }
  EXPECT_EQ(NextTokenModel::CheckpointBytes(65536, 1024), 24ull * 65536 * 1024 + 12 * 65536 + 56);
}

TEST(NextTokenModelTest, CheckpointRoundTripResumesExactly) {
  NextTokenModelConfig c;
  c.vocab = 300;
  c.dim = 16;
  c.learning_rate = 0.03f;
  c.seed = 42;
  NextTokenModel m = MakeModel(c);
  std::vector<uint16_t> t = GenerateCorpus(4, 60000, 300);
  Train(&m, std::vector<uint16_t>(t.begin(), t.begin() + 30000), 4096);
  const std::string ckpt = m.Serialize();

  absl::StatusOr<NextTokenModel> r = NextTokenModel::Deserialize(ckpt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->config().vocab, 300u);
  EXPECT_EQ(r->config().dim, 16u);
  EXPECT_EQ(r->config().learning_rate, 0.03f);
  EXPECT_EQ(r->config().seed, 42u);
  EXPECT_EQ(r->tokens_trained(), m.tokens_trained());
  EXPECT_EQ(r->steps(), m.steps());
  EXPECT_EQ(r->Evaluate(t.data(), t.size()), m.Evaluate(t.data(), t.size()));
  EXPECT_EQ(r->Serialize(), ckpt);

  // Adam's moments are part of the checkpoint: training goes on identically.
  std::vector<uint16_t> rest(t.begin() + 29999, t.end());
  Train(&m, rest, 4096);
  Train(&*r, rest, 4096);
  EXPECT_EQ(r->Serialize(), m.Serialize());
}

class CorruptCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NextTokenModelConfig c;
    c.vocab = 64;
    c.dim = 4;
    NextTokenModel m = MakeModel(c);
    std::vector<uint16_t> t = GenerateCorpus(1, 2000, 64);
    m.TrainBatch(t.data(), t.size());
    ckpt_ = m.Serialize();
  }
  // Expects Deserialize to fail with a message containing `what`.
  void ExpectRejected(const std::string& data, const std::string& what) {
    absl::StatusOr<NextTokenModel> r = NextTokenModel::Deserialize(data);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status();
  }
  // Rewrites the trailing checksum so that only the edited field is wrong.
  static std::string Reseal(std::string data) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i + 8 < data.size(); ++i) {
      h ^= static_cast<unsigned char>(data[i]);
      h *= 0x100000001b3ULL;
    }
    for (int i = 0; i < 8; ++i) data[data.size() - 8 + i] = static_cast<char>(h >> (8 * i));
    return data;
  }
  std::string ckpt_;
};

TEST_F(CorruptCheckpointTest, Empty) { ExpectRejected("", "bad magic"); }

TEST_F(CorruptCheckpointTest, BadMagic) {
  std::string bad = ckpt_;
  bad[0] = 'X';
  ExpectRejected(bad, "bad magic");
}

TEST_F(CorruptCheckpointTest, UnsupportedVersion) {
  std::string bad = ckpt_;
  bad[8] = 2;
  ExpectRejected(bad, "version 2 is not supported");
}

TEST_F(CorruptCheckpointTest, EveryTruncationRejected) {
  for (size_t len = 0; len < ckpt_.size(); ++len) {
    EXPECT_FALSE(NextTokenModel::Deserialize(ckpt_.substr(0, len)).ok()) << len;
  }
  ExpectRejected(ckpt_.substr(0, ckpt_.size() - 1), "truncated");
  ExpectRejected(ckpt_.substr(0, 20), "truncated");
}

TEST_F(CorruptCheckpointTest, TrailingBytesRejected) {
  ExpectRejected(ckpt_ + "x", "too long");
}

TEST_F(CorruptCheckpointTest, FlippedWeightBitRejected) {
  for (size_t pos : {size_t{60}, ckpt_.size() / 2, ckpt_.size() - 9, ckpt_.size() - 1}) {
    std::string bad = ckpt_;
    bad[pos] ^= 0x10;
    ExpectRejected(bad, "checksum mismatch");
  }
}

TEST_F(CorruptCheckpointTest, InvalidConfigRejected) {
  std::string bad = ckpt_;
  bad[12] = 1;  // vocab = 1 (little-endian u32 at offset 12)
  bad[13] = bad[14] = bad[15] = 0;
  ExpectRejected(Reseal(bad), "trainer.vocab");
}

TEST_F(CorruptCheckpointTest, NonFiniteWeightRejected) {
  std::string bad = ckpt_;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&bad[48], &nan, 4);  // first embedding weight (little-endian host)
  ExpectRejected(Reseal(bad), "non-finite");
}

}  // namespace
}  // namespace gputravel
