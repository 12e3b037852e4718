#include "trainer/training_policy.h"

#include <algorithm>

#include <cmath>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

v1::TrainingTerms TermsWithin(const v1::TrainingPolicy& p) {
  v1::TrainingTerms t;
  t.set_trainer_kind("next-token");
  t.set_vocab(512);
  t.set_dim(32);
  t.set_learning_rate(0.05);
  t.set_batch_tokens(65536);
  t.set_seed(1);
  return Strictest(t, {p});
}

TEST(TrainingPolicyTest, AnEmptyObjectIsTheDefault) {
  auto p = ParseTrainingPolicy(nlohmann::json::object(), "h.json: training_policy");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->SerializeAsString(), DefaultTrainingPolicy().SerializeAsString());
  EXPECT_EQ(p->min_window_bytes(), kDefaultMinWindowBytes);
  EXPECT_EQ(p->min_windows_per_loss(), kDefaultMinWindowsPerLoss);
  EXPECT_EQ(p->loss_decimals(), kDefaultLossDecimals);
}

// An external trainer (a process outside the orchestrator's binary) is
// allowed only where a holder lists it: not by default.
TEST(TrainingPolicyTest, AnExternalTrainerIsAnOptIn) {
  const v1::TrainingPolicy d = DefaultTrainingPolicy();
  EXPECT_EQ(std::count(d.trainer_kinds().begin(), d.trainer_kinds().end(), "external"), 0);
  auto p = ParseTrainingPolicy(nlohmann::json::parse(R"({"trainer_kinds": ["external"]})"),
                               "h.json: training_policy");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->trainer_kinds_size(), 1);
  EXPECT_EQ(p->trainer_kinds(0), "external");
}

TEST(TrainingPolicyTest, ParsesEveryField) {
  auto p = ParseTrainingPolicy(
      nlohmann::json::parse(R"({"min_window_bytes": 4096, "trainer_kinds": ["none"],
        "min_vocab": 1024, "min_batch_tokens": 8192, "max_learning_rate": 0.01,
        "loss_decimals": 1, "min_windows_per_loss": 10})"),
      "h.json: training_policy");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->min_window_bytes(), 4096u);
  ASSERT_EQ(p->trainer_kinds_size(), 1);
  EXPECT_EQ(p->trainer_kinds(0), "none");
  EXPECT_EQ(p->min_vocab(), 1024u);
  EXPECT_EQ(p->min_batch_tokens(), 8192u);
  EXPECT_DOUBLE_EQ(p->max_learning_rate(), 0.01);
  EXPECT_EQ(p->loss_decimals(), 1u);
  EXPECT_EQ(p->min_windows_per_loss(), 10u);
}

TEST(TrainingPolicyTest, RefusesBadFieldsNamingThem) {
  struct Case {
    const char* json;
    const char* expect;
  } cases[] = {
      {R"({"min_window": 4096})", "unknown field 'min_window'"},
      {R"({"min_window_bytes": 16})", "'min_window_bytes' must be an integer >= 32"},
      {R"({"min_window_bytes": -1})", "'min_window_bytes' must be a non-negative integer"},
      {R"({"min_window_bytes": 1.5})", "'min_window_bytes' must be a non-negative integer"},
      {R"({"trainer_kinds": []})", "'trainer_kinds' must be a non-empty array"},
      {R"({"trainer_kinds": ["gpt"]})", "(got \"gpt\")"},
      {R"({"trainer_kinds": "none"})", "'trainer_kinds' must be a non-empty array"},
      {R"({"min_vocab": 1})", "'min_vocab' must be 2..65536"},
      {R"({"min_vocab": 70000})", "'min_vocab' must be 2..65536"},
      {R"({"min_batch_tokens": 1})", "'min_batch_tokens' must be an integer >= 2"},
      {R"({"max_learning_rate": 0})", "'max_learning_rate' must be a number > 0"},
      {R"({"max_learning_rate": "1"})", "'max_learning_rate' must be a number > 0"},
      {R"({"loss_decimals": 7})", "'loss_decimals' must be 0..6"},
      {R"({"min_windows_per_loss": 0})", "'min_windows_per_loss' must be 1..1000000"},
  };
  for (const auto& c : cases) {
    auto p = ParseTrainingPolicy(nlohmann::json::parse(c.json), "h.json: training_policy");
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_NE(std::string(p.status().message()).find(c.expect), std::string::npos)
        << c.json << " -> " << p.status();
    EXPECT_NE(std::string(p.status().message()).find("h.json: training_policy"),
              std::string::npos);
  }
  EXPECT_FALSE(ParseTrainingPolicy(nlohmann::json::array(), "x").ok());
}

TEST(TrainingPolicyTest, ValidatesAReportedPolicy) {
  EXPECT_TRUE(ValidateTrainingPolicy(DefaultTrainingPolicy(), "holder 'a'").ok());
  v1::TrainingPolicy p = DefaultTrainingPolicy();
  p.set_min_windows_per_loss(0);
  absl::Status s = ValidateTrainingPolicy(p, "holder 'a'");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("holder 'a': training_policy"), absl::string_view::npos) << s;
  EXPECT_FALSE(ValidateTrainingPolicy(v1::TrainingPolicy(), "holder 'a'").ok());
}

TEST(TrainingPolicyTest, CheckTermsRefusesEachFieldOutsideThePolicy) {
  const v1::TrainingPolicy p = DefaultTrainingPolicy();
  const v1::TrainingTerms ok = TermsWithin(p);
  EXPECT_TRUE(CheckTerms(p, ok, "h1").ok());
  struct Case {
    void (*edit)(v1::TrainingTerms*);
    const char* expect;
  } cases[] = {
      {[](v1::TrainingTerms* t) { t->set_trainer_kind("gpt"); }, "trainer.kind is \"gpt\""},
      {[](v1::TrainingTerms* t) { t->set_vocab(2); }, "trainer.vocab is 2; at least 256"},
      {[](v1::TrainingTerms* t) { t->set_batch_tokens(2); },
       "trainer.batch_tokens is 2; at least 4096"},
      {[](v1::TrainingTerms* t) { t->set_learning_rate(0.5); },
       "trainer.learning_rate is 0.5; at most 0.1"},
      {[](v1::TrainingTerms* t) { t->set_min_window_bytes(32); }, "minimum window is 32 bytes"},
      {[](v1::TrainingTerms* t) { t->set_loss_decimals(6); }, "6 decimals; at most 2"},
      {[](v1::TrainingTerms* t) { t->set_min_windows_per_loss(1); },
       "per 1 windows; at least 4"},
  };
  for (const auto& c : cases) {
    v1::TrainingTerms t = ok;
    c.edit(&t);
    absl::Status s = CheckTerms(p, t, "h1");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << c.expect;
    EXPECT_NE(s.message().find(c.expect), absl::string_view::npos) << s;
    EXPECT_NE(s.message().find("holder 'h1'"), absl::string_view::npos) << s;
  }
  v1::TrainingTerms nan = ok;
  nan.set_learning_rate(std::nan(""));
  EXPECT_FALSE(CheckTerms(p, nan, "h1").ok());
}

TEST(TrainingPolicyTest, CheckWindowRefusesShortWindows) {
  const v1::TrainingPolicy p = DefaultTrainingPolicy();
  EXPECT_TRUE(CheckWindow(p, kDefaultMinWindowBytes, "h1").ok());
  absl::Status s = CheckWindow(p, 32, "h1");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("a window of 32 bytes"), absl::string_view::npos) << s;
}

TEST(TrainingPolicyTest, StrictestTakesTheTightestOfEachField) {
  v1::TrainingPolicy a = DefaultTrainingPolicy();
  a.set_min_window_bytes(4096);
  a.set_loss_decimals(4);
  a.set_min_windows_per_loss(1);
  v1::TrainingPolicy b = DefaultTrainingPolicy();
  b.set_min_window_bytes(2048);
  b.set_loss_decimals(1);
  b.set_min_windows_per_loss(3);
  v1::TrainingTerms t;
  t.set_trainer_kind("next-token");
  t.set_vocab(300);
  t.set_batch_tokens(65536);
  t.set_learning_rate(0.05);
  v1::TrainingTerms s = Strictest(t, {a, b});
  EXPECT_EQ(s.min_window_bytes(), 4096u);
  EXPECT_EQ(s.loss_decimals(), 1u);
  EXPECT_EQ(s.min_windows_per_loss(), 3u);
  EXPECT_EQ(s.vocab(), 300u);  // trainer fields kept
  EXPECT_TRUE(CheckTerms(a, s, "a").ok());
  EXPECT_TRUE(CheckTerms(b, s, "b").ok());
  v1::TrainingTerms d = Strictest(t, {});
  EXPECT_EQ(d.min_windows_per_loss(), kDefaultMinWindowsPerLoss);
  EXPECT_EQ(d.min_window_bytes(), kDefaultMinWindowBytes);
}

TEST(TrainingPolicyTest, ReportedLossIsTheRoundedMeanOfAFullBlock) {
  v1::TrainingTerms t;
  t.set_loss_decimals(2);
  t.set_min_windows_per_loss(3);
  EXPECT_FALSE(ReportedLoss({}, t).has_value());
  EXPECT_FALSE(ReportedLoss({2.0, 3.0}, t).has_value());
  auto r = ReportedLoss({2.0, 3.0, 2.5004}, t);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(*r, 2.5);
  t.set_min_windows_per_loss(1);
  EXPECT_DOUBLE_EQ(*ReportedLoss({1.23456}, t), 1.23);
  EXPECT_DOUBLE_EQ(RoundLoss(1.23456, 0), 1.0);
  EXPECT_DOUBLE_EQ(RoundLoss(1.235, 2), 1.24);
  EXPECT_DOUBLE_EQ(RoundLoss(1.23456, 4), 1.2346);
}

TEST(TrainingPolicyTest, DescribeTermsNamesEveryField) {
  v1::TrainingTerms t = TermsWithin(DefaultTrainingPolicy());
  EXPECT_EQ(DescribeTerms(t),
            "next-token vocab 512 dim 32 lr 0.05 batch 65536 seed 1; windows >= 1048576 B; "
            "loss per 4 windows, 2 decimals");
}

}  // namespace
}  // namespace gputravel
