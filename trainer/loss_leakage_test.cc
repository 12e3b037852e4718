// The loss-inference attack on a holder's window (P1), against what the
// orchestrator reports. The attacker writes the campaign spec and reads the
// reported losses; it knows everything about the model and every token of
// the holder's windows except 16 secret bits: the parities of the first 16
// tokens of the first window. It wins if the reported figures differ between
// candidate values of those bits.
//   - Unrestricted (a 32-byte window, vocab 2, the loss at full precision
//     per trip): the loss alone identifies most windows outright.
//   - Under the default training policy, with the settings most favourable
//     to the attacker that the policy allows (the smallest window, vocabulary
//     and batch, the largest learning rate; losses per 4 windows, 2
//     decimals): every candidate yields the same reported training and
//     held-out loss, so no guess does better than chance, although the full-
//     precision losses differ.

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/builtin_trainer.h"
#include "trainer/data_loader.h"
#include "trainer/next_token_model.h"
#include "trainer/synthetic_corpus.h"
#include "trainer/training_policy.h"

namespace gputravel {
namespace {

constexpr int kSecretTokens = 16;

// The candidate's secret bits set as the low bits of the first 16 tokens.
std::vector<uint16_t> WithSecret(std::vector<uint16_t> tokens, uint32_t secret) {
  for (int i = 0; i < kSecretTokens; ++i) {
    tokens[i] = static_cast<uint16_t>((tokens[i] & ~1u) | ((secret >> i) & 1u));
  }
  return tokens;
}

TrainingWindow Window(uint64_t trip, const std::vector<uint16_t>& tokens) {
  TrainingWindow w;
  w.campaign = "attack";
  w.trip = trip;
  w.holder = "victim";
  w.tokens.reserve(tokens.size() * 2);
  for (uint16_t t : tokens) {
    w.tokens.push_back(static_cast<char>(t & 0xff));
    w.tokens.push_back(static_cast<char>(t >> 8));
  }
  return w;
}

TEST(LossLeakageTest, UnrestrictedAPerTripLossIdentifiesTheWindow) {
  // What a spec could ask for before holders had a policy: a 32-byte window
  // in 2-token batches (8 optimiser steps), vocab 2, a large learning rate,
  // and each trip's loss at full precision.
  NextTokenModelConfig c;
  c.vocab = 2;
  c.learning_rate = 1.0f;
  c.seed = 1;
  auto trainer = BuiltinTrainer::Create(c);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const std::string fresh = (*trainer)->Checkpoint();
  DataLoader loader(2);
  ASSERT_TRUE((*trainer)->Start(&loader).ok());
  // The attacker's table: the loss of every candidate window, computed in
  // advance with the same model; a loss no other window shares identifies
  // its window outright.
  std::map<double, int> windows_per_loss;
  const uint32_t kCandidates = 1u << kSecretTokens;
  for (uint32_t secret = 0; secret < kCandidates; ++secret) {
    ASSERT_TRUE((*trainer)->Restore(fresh).ok());
    auto r = loader.Offer(
        Window(secret + 1, WithSecret(std::vector<uint16_t>(kSecretTokens, 0), secret)),
        absl::Seconds(600));
    ASSERT_TRUE(r.ok()) << r.status();
    ++windows_per_loss[r->mean_loss];
  }
  (*trainer)->Stop();
  uint32_t identified = 0;
  for (const auto& [loss, n] : windows_per_loss) identified += n == 1 ? 1 : 0;
  // Guessing the most likely window for each loss, the attacker is right
  // with probability (distinct losses) / (candidates); chance is 1/65536.
  std::printf("unrestricted: %u of %u windows identified by their loss; a guess is right "
              "with probability %.3f\n",
              identified, kCandidates,
              static_cast<double>(windows_per_loss.size()) / kCandidates);
  EXPECT_GT(identified, kCandidates * 3 / 4);
  EXPECT_GT(windows_per_loss.size(), kCandidates * 3 / 4);
}

TEST(LossLeakageTest, TheDefaultPolicyReportsTheSameFiguresForEverySecret) {
  const v1::TrainingPolicy policy = DefaultTrainingPolicy();
  // The attacker's best terms inside the policy.
  v1::TrainingTerms terms;
  terms.set_trainer_kind("next-token");
  terms.set_vocab(policy.min_vocab());
  terms.set_dim(32);
  terms.set_learning_rate(policy.max_learning_rate());
  terms.set_batch_tokens(policy.min_batch_tokens());
  terms.set_seed(1);
  terms = Strictest(terms, {policy});
  ASSERT_TRUE(CheckTerms(policy, terms, "victim").ok());
  const uint64_t window_tokens = terms.min_window_bytes() / 2;
  const uint32_t windows = terms.min_windows_per_loss();

  std::vector<std::vector<uint16_t>> data;
  for (uint32_t i = 0; i < windows; ++i) {
    data.push_back(GenerateCorpus(7000 + i, window_tokens, terms.vocab()));
  }
  const std::vector<uint16_t> held_out = GenerateCorpus(424242, 1 << 15, terms.vocab());
  NextTokenModelConfig mc;
  mc.vocab = terms.vocab();
  mc.dim = terms.dim();
  mc.learning_rate = static_cast<float>(terms.learning_rate());
  mc.seed = terms.seed();

  const uint32_t kSecrets[] = {0x0000, 0xffff, 0x5555, 0xbeef};
  std::set<std::pair<double, double>> reported;
  std::set<std::pair<double, double>> exact;
  for (uint32_t secret : kSecrets) {
    auto trainer = BuiltinTrainer::Create(mc);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    DataLoader loader(terms.batch_tokens());
    ASSERT_TRUE((*trainer)->Start(&loader).ok());
    std::vector<double> losses;
    for (uint32_t i = 0; i < windows; ++i) {
      auto r = loader.Offer(Window(i + 1, i == 0 ? WithSecret(data[0], secret) : data[i]),
                            absl::Seconds(600));
      ASSERT_TRUE(r.ok()) << r.status();
      losses.push_back(r->mean_loss);
    }
    const double eval = (*trainer)->Evaluate(held_out.data(), held_out.size());
    (*trainer)->Stop();
    auto loss = ReportedLoss(losses, terms);
    ASSERT_TRUE(loss.has_value());
    reported.insert({*loss, RoundLoss(eval, terms.loss_decimals())});
    double mean = 0;
    for (double l : losses) mean += l / losses.size();
    exact.insert({mean, eval});
    std::printf("secret %04x: mean loss %.9f held-out %.9f -> reported %.2f / %.2f\n", secret,
                mean, eval, *loss, RoundLoss(eval, terms.loss_decimals()));
  }
  // The secret moves the exact figures, but not what is reported.
  EXPECT_GT(exact.size(), 1u);
  EXPECT_EQ(reported.size(), 1u);
}

}  // namespace
}  // namespace gputravel
