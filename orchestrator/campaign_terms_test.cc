#include "orchestrator/campaign_terms.h"

#include "gtest/gtest.h"
#include "trainer/training_policy.h"

namespace gputravel {
namespace {

CampaignSpec Spec(uint64_t buffer_bytes) {
  CampaignSpec s;
  s.name = "c";
  s.gpu = "gpu0";
  s.buffer_bytes = buffer_bytes;
  return s;  // the default trainer
}

HolderTermsInput Holder(const std::string& name, uint64_t bytes,
                        v1::TrainingPolicy policy = DefaultTrainingPolicy()) {
  return HolderTermsInput{name, bytes, std::move(policy)};
}

void ExpectRefused(const absl::StatusOr<CampaignTerms>& t, const std::string& says) {
  ASSERT_FALSE(t.ok()) << says;
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << t.status();
  EXPECT_NE(t.status().message().find(says), absl::string_view::npos) << t.status();
}

TEST(CampaignTermsTest, TheDefaultSpecFitsTheDefaultPolicy) {
  auto t = DecideCampaignTerms(Spec(8 << 20), {Holder("a", 20 << 20), Holder("b", 3 << 20)});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->terms.trainer_kind(), "next-token");
  EXPECT_EQ(t->terms.vocab(), 512u);
  EXPECT_EQ(t->terms.min_windows_per_loss(), kDefaultMinWindowsPerLoss);
  EXPECT_EQ(t->terms.loss_decimals(), kDefaultLossDecimals);
  EXPECT_EQ(t->terms.min_window_bytes(), kDefaultMinWindowBytes);
  EXPECT_EQ(t->usable_bytes, (std::vector<uint64_t>{20 << 20, 3 << 20}));
  EXPECT_EQ(t->dropped_tail_bytes, (std::vector<uint64_t>{0, 0}));
}

// The attack's spec (32-byte windows, vocab 2, 2-token batches, a large
// learning rate) is refused at create, naming the holder and the limit.
TEST(CampaignTermsTest, TheLeakingSpecIsRefusedNamingTheHolder) {
  CampaignSpec s = Spec(32);
  s.trainer.vocab = 2;
  s.trainer.batch_tokens = 2;
  s.trainer.learning_rate = 1.0;
  ExpectRefused(DecideCampaignTerms(s, {Holder("a", 20 << 20)}),
                "holders[0]: trainer.vocab is 2; at least 256 allowed");
  s.trainer.vocab = 512;
  ExpectRefused(DecideCampaignTerms(s, {Holder("a", 20 << 20)}), "trainer.batch_tokens is 2");
  s.trainer.batch_tokens = 65536;
  ExpectRefused(DecideCampaignTerms(s, {Holder("a", 20 << 20)}), "trainer.learning_rate is 1");
  s.trainer.learning_rate = 0.05;
  ExpectRefused(DecideCampaignTerms(s, {Holder("a", 20 << 20)}),
                "holders[0]: buffer_bytes is 32; holder 'a' provisions windows of at least "
                "1048576 bytes");
  s.buffer_bytes = 8 << 20;
  EXPECT_TRUE(DecideCampaignTerms(s, {Holder("a", 20 << 20)}).ok());
}

// P1: a holder's windows reach an external trainer only if its policy
// lists "external" (the default policy does not); the built-in model's
// terms do not bind an external trainer.
TEST(CampaignTermsTest, AnExternalTrainerNeedsEveryHolderToAllowIt) {
  CampaignSpec s = Spec(8 << 20);
  s.trainer.kind = "external";
  s.trainer.identity = "torch-1";
  v1::TrainingPolicy allows = DefaultTrainingPolicy();
  allows.add_trainer_kinds("external");
  ExpectRefused(DecideCampaignTerms(s, {Holder("a", 20 << 20, allows), Holder("b", 3 << 20)}),
                "holders[1]: trainer.kind is \"external\"; allowed: next-token, none");
  auto t = DecideCampaignTerms(s, {Holder("a", 20 << 20, allows), Holder("b", 3 << 20, allows)});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->terms.trainer_kind(), "external");
  EXPECT_EQ(t->terms.dim(), 0u);
  EXPECT_EQ(t->terms.learning_rate(), 0);
  EXPECT_EQ(t->terms.seed(), 0u);
}

TEST(CampaignTermsTest, EveryHoldersPolicyCountsAndTheStrictestReportingWins) {
  v1::TrainingPolicy lax = DefaultTrainingPolicy();
  lax.set_min_window_bytes(4096);
  lax.set_min_vocab(2);
  lax.set_min_windows_per_loss(1);
  lax.set_loss_decimals(6);
  v1::TrainingPolicy strict = DefaultTrainingPolicy();
  strict.set_min_vocab(1024);
  strict.set_min_windows_per_loss(10);
  strict.set_loss_decimals(1);
  strict.clear_trainer_kinds();
  strict.add_trainer_kinds("next-token");
  CampaignSpec s = Spec(8 << 20);
  s.trainer.vocab = 512;
  ExpectRefused(DecideCampaignTerms(s, {Holder("lax", 20 << 20, lax), Holder("s", 20 << 20, strict)}),
                "holders[1]: trainer.vocab is 512; at least 1024 allowed (min_vocab) (holder 's'");
  s.trainer.vocab = 1024;
  auto t = DecideCampaignTerms(s, {Holder("lax", 20 << 20, lax), Holder("s", 20 << 20, strict)});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->terms.min_windows_per_loss(), 10u);
  EXPECT_EQ(t->terms.loss_decimals(), 1u);
  EXPECT_EQ(t->terms.min_window_bytes(), kDefaultMinWindowBytes);
  s.trainer.kind = "none";
  ExpectRefused(DecideCampaignTerms(s, {Holder("lax", 20 << 20, lax), Holder("s", 20 << 20, strict)}),
                "holders[1]: trainer.kind is \"none\"; allowed: next-token");
}

// A pass's last window is what remains of the dataset: shorter than the
// minimum window it is not provisioned; a dataset shorter than one minimum
// window is refused.
TEST(CampaignTermsTest, ShortTailsAreDroppedAndShortDatasetsRefused) {
  const uint64_t mib = 1 << 20;
  auto t = DecideCampaignTerms(Spec(4 * mib),
                               {Holder("a", 8 * mib + 32), Holder("b", 9 * mib), Holder("c", 4 * mib)});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->usable_bytes, (std::vector<uint64_t>{8 * mib, 9 * mib, 4 * mib}));
  EXPECT_EQ(t->dropped_tail_bytes, (std::vector<uint64_t>{32, 0, 0}));
  ExpectRefused(DecideCampaignTerms(Spec(4 * mib), {Holder("a", 8 * mib), Holder("tiny", 1000)}),
                "holders[1]: holder 'tiny' serves 1000 bytes, less than the campaign's minimum "
                "window of 1048576 bytes");
}

TEST(CampaignTermsTest, AMalformedReportedPolicyIsRefused) {
  v1::TrainingPolicy broken;  // what an agent without the field would send
  ExpectRefused(DecideCampaignTerms(Spec(8 << 20), {Holder("old", 20 << 20, broken)}),
                "holders[0]: holder 'old': training_policy: 'min_window_bytes'");
}

}  // namespace
}  // namespace gputravel
