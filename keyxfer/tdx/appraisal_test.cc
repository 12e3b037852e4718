#include "keyxfer/tdx/appraisal.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/collateral.h"
#include "keyxfer/tdx/testdata.h"
#include "util/test_dir.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class AppraisalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto v = QuoteVerifier::Create(testing::RootCaPem());
    ASSERT_TRUE(v.ok());
    verifier_ = std::make_unique<QuoteVerifier>(*v);
  }
  static Quote Q(const std::string& bytes) { return *ParseQuote(bytes); }
  static CollateralBundle B(const std::string& json) {
    return *ParseCollateralBundle(json, "test");
  }
  std::unique_ptr<QuoteVerifier> verifier_;
};

TEST_F(AppraisalTest, RealQuoteIsAuthenticUpToDateAndAccepted) {
  Quote q = Q(testing::DcapQuote());
  CollateralBundle b = B(testing::DcapQuoteCollateral());
  Appraisal a = Appraise(q, *verifier_, &b, Policy{}, nullptr,
                         testing::DcapQuoteValidTime());
  EXPECT_TRUE(a.Verdict().ok()) << a.Verdict();
  ASSERT_TRUE(a.tcb_evaluation.has_value());
  EXPECT_EQ(a.tcb_evaluation->status, "UpToDate");
  // The PCK CRL's date reaches the policy's collateral age check.
  ASSERT_TRUE(a.verified_collateral.has_value());
  EXPECT_EQ(a.tcb_evaluation->pck_crl_this_update,
            a.verified_collateral->pck_crl.this_update);
  ASSERT_THAT(a.pck_chain, SizeIs(3));
  EXPECT_THAT(a.pck_chain[0].subject, HasSubstr("Intel SGX PCK Certificate"));
}

TEST_F(AppraisalTest, OutdatedQuoteIsAuthenticButNoPolicyAcceptsIt) {
  Quote q = Q(testing::DcapOutdatedQuote());
  CollateralBundle b = B(testing::DcapOutdatedQuoteCollateral());
  auto permissive = Policy::FromJson(
      R"({"allowed_tcb_statuses": ["UpToDate", "SWHardeningNeeded",
          "ConfigurationNeeded", "ConfigurationAndSWHardeningNeeded",
          "OutOfDate", "OutOfDateConfigurationNeeded", "Revoked"]})");
  ASSERT_TRUE(permissive.ok());
  Appraisal a = Appraise(q, *verifier_, &b, *permissive, nullptr,
                         testing::DcapOutdatedQuoteValidTime());
  EXPECT_TRUE(a.authenticity.ok()) << a.authenticity;
  EXPECT_TRUE(a.collateral.ok()) << a.collateral;
  EXPECT_EQ(a.tcb.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(a.Verdict().message()),
              HasSubstr("SGX TCB component 8 of the PCK certificate is 3, the "
                        "level needs 5"));
}

TEST_F(AppraisalTest, ExpiredCollateralRefuses) {
  Quote q = Q(testing::DcapQuote());
  CollateralBundle b = B(testing::DcapQuoteCollateral());
  Appraisal a = Appraise(q, *verifier_, &b, Policy{}, nullptr,
                         absl::FromCivil(absl::CivilSecond(2025, 8, 1, 0, 0, 0),
                                         absl::UTCTimeZone()));
  EXPECT_EQ(a.Verdict().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(a.Verdict().message()), HasSubstr("expired"));
}

TEST_F(AppraisalTest, AnotherPlatformsCollateralRefusesNamingFmspc) {
  Quote q = Q(testing::DcapQuote());
  // Verified at a time when the other bundle is valid; the PCK leaf is too.
  CollateralBundle b = B(testing::DcapOutdatedQuoteCollateral());
  Appraisal a = Appraise(q, *verifier_, &b, Policy{}, nullptr,
                         testing::DcapOutdatedQuoteValidTime());
  EXPECT_EQ(a.Verdict().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(a.Verdict().message()),
              HasSubstr("the PCK certificate's FMSPC B0C06F000000"));
}

TEST_F(AppraisalTest, PolicyNeedingCollateralRefusesWithoutIt) {
  Quote q = Q(testing::DcapQuote());
  auto p = Policy::FromJson(R"({"max_collateral_age": "720h"})");
  Appraisal a = Appraise(q, *verifier_, nullptr, *p, nullptr,
                         testing::DcapQuoteValidTime());
  EXPECT_TRUE(a.authenticity.ok());
  EXPECT_THAT(std::string(a.Verdict().message()),
              HasSubstr("actual none (no collateral given)"));
  // Without such fields, a quote is judged on its report alone.
  EXPECT_TRUE(Appraise(q, *verifier_, nullptr, Policy{}, nullptr,
                       testing::DcapQuoteValidTime())
                  .Verdict()
                  .ok());
}

// A policy that spells out the default TCB fields ("allowed_tcb_statuses":
// ["UpToDate"], "allowed_advisory_ids": []) asks for a TCB evaluation; without
// collateral it must refuse rather than accept an OutOfDate platform unseen.
TEST_F(AppraisalTest, ExplicitDefaultTcbFieldsStillNeedCollateral) {
  Quote q = Q(testing::DcapOutdatedQuote());
  for (const char* json : {R"({"allowed_tcb_statuses": ["UpToDate"]})",
                           R"({"allowed_advisory_ids": []})"}) {
    auto p = Policy::FromJson(json);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->NeedsCollateral()) << json;
    Appraisal a = Appraise(q, *verifier_, nullptr, *p, nullptr,
                           testing::DcapOutdatedQuoteValidTime());
    EXPECT_TRUE(a.authenticity.ok()) << a.authenticity;
    EXPECT_THAT(std::string(a.Verdict().message()),
                HasSubstr("actual none (no collateral given)"))
        << json;
  }
  EXPECT_FALSE(Policy{}.NeedsCollateral());
}

TEST_F(AppraisalTest, StoreWithoutThePlatformRefuses) {
  std::string path = TestTmpDir() + "/other.json";
  {
    std::ofstream(path) << testing::DcapOutdatedQuoteCollateral();
  }
  auto store = CollateralStore::Open(path);
  ASSERT_TRUE(store.ok());
  Appraisal a = AppraiseWithStore(Q(testing::DcapQuote()), *verifier_,
                                  store->get(), Policy{}, nullptr,
                                  testing::DcapQuoteValidTime());
  EXPECT_TRUE(a.authenticity.ok());
  EXPECT_EQ(a.Verdict().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(a.Verdict().message()),
              HasSubstr("no bundle for FMSPC B0C06F000000"));
}

}  // namespace
}  // namespace gputravel::tdx
