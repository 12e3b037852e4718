#include "keyxfer/tdx/tcb_evaluation.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/collateral.h"
#include "keyxfer/tdx/testdata.h"

namespace gputravel::tdx {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A real quote with its collateral parsed (signatures are collateral_test's
// subject; here the documents are edited in memory to reach each branch).
struct Case {
  Quote quote;
  PckExtensions pck;
  TcbInfo tcb_info;
  QeIdentity qe;
};

Case Load(const std::string& quote_bytes, const std::string& collateral) {
  Case c;
  auto q = ParseQuote(quote_bytes);
  EXPECT_TRUE(q.ok()) << q.status();
  c.quote = *q;
  auto pck = ParsePckExtensionsPem(c.quote.pck_chain_pem.at(0));
  EXPECT_TRUE(pck.ok()) << pck.status();
  c.pck = *pck;
  auto b = ParseCollateralBundle(collateral, "test");
  EXPECT_TRUE(b.ok()) << b.status();
  auto info = ParseTcbInfo(b->tcb_info);
  auto qe = ParseQeIdentity(b->qe_identity);
  EXPECT_TRUE(info.ok() && qe.ok());
  c.tcb_info = *info;
  c.qe = *qe;
  return c;
}

Case UpToDate() {
  return Load(testing::DcapQuote(), testing::DcapQuoteCollateral());
}

absl::StatusOr<TcbEvaluation> Evaluate(const Case& c) {
  return EvaluateTcb(c.quote, c.pck, c.tcb_info, c.qe);
}

TEST(TcbEvaluationTest, RealQuoteIsUpToDate) {
  Case c = UpToDate();
  auto e = Evaluate(c);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->status, "UpToDate");
  EXPECT_THAT(e->advisory_ids, IsEmpty());
  EXPECT_EQ(e->level_index, 0);
  EXPECT_EQ(e->tdx_module_id, "TDX_01");
  EXPECT_EQ(e->tdx_module_isv_svn, 6);
  EXPECT_EQ(e->tdx_module_status, "UpToDate");
  EXPECT_EQ(e->qe_status, "UpToDate");
  EXPECT_EQ(e->tcb_evaluation_data_number, 17);
  EXPECT_EQ(e->tcb_info_next_update, c.tcb_info.next_update);
}

TEST(TcbEvaluationTest, OutdatedQuoteMatchesNoLevelAndNamesTheComponent) {
  Case c = Load(testing::DcapOutdatedQuote(),
                testing::DcapOutdatedQuoteCollateral());
  auto e = Evaluate(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("TDX TCB not supported: no TCB level of the TCB info "
                        "for FMSPC 90C06F000000 matches this platform: level 0 "
                        "(UpToDate, 2024-11-13): SGX TCB component 8 of the "
                        "PCK certificate is 3, the level needs 5"));
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("level 2 (OutOfDate, 2018-01-04): SGX TCB component "
                        "8 of the PCK certificate is 3, the level needs 5"));
}

TEST(TcbEvaluationTest, CollateralOfAnotherPlatformIsRefused) {
  Case c = Load(testing::DcapQuote(), testing::DcapOutdatedQuoteCollateral());
  auto e = Evaluate(c);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("TCB info FMSPC 90C06F000000, the PCK certificate's "
                        "FMSPC B0C06F000000"));
}

TEST(TcbEvaluationTest, LowerLevelGivesItsStatusAndAdvisories) {
  Case c = UpToDate();
  c.tcb_info.levels[0].pce_svn = 12;  // the platform's PCESVN is 11
  auto e = Evaluate(c);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->level_index, 1);
  EXPECT_EQ(e->status, "OutOfDate");
  EXPECT_THAT(e->advisory_ids, SizeIs(14));
  EXPECT_EQ(e->advisory_ids.front(), "INTEL-SA-00106");
}

TEST(TcbEvaluationTest, OutOfDateTdxModuleLowersTheStatus) {
  Case c = UpToDate();
  c.tcb_info.tdx_module_identities[1].levels[0].isv_svn = 7;  // quote has 6
  c.tcb_info.tdx_module_identities[1].levels[1].advisory_ids = {"INTEL-SA-1"};
  auto e = Evaluate(c);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->tdx_module_status, "OutOfDate");
  EXPECT_EQ(e->status, "OutOfDate");
  EXPECT_THAT(e->advisory_ids, ElementsAre("INTEL-SA-1"));
}

TEST(TcbEvaluationTest, ConfigurationNeededWithOutOfDateQe) {
  Case c = UpToDate();
  c.tcb_info.levels[0].status = "ConfigurationNeeded";
  c.qe.levels[0].isv_svn = 7;  // the QE's ISVSVN is 6
  c.qe.levels.push_back({3, absl::UnixEpoch(), "OutOfDate", {"INTEL-SA-2"}});
  auto e = Evaluate(c);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->qe_status, "OutOfDate");
  EXPECT_EQ(e->status, "OutOfDateConfigurationNeeded");
}

TEST(TcbEvaluationTest, RevokedQeLevelRevokes) {
  Case c = UpToDate();
  c.qe.levels[0].status = "Revoked";
  auto e = Evaluate(c);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->status, "Revoked");
}

TEST(TcbEvaluationTest, QeBelowEveryLevelIsNotSupported) {
  Case c = UpToDate();
  c.qe.levels[0].isv_svn = 9;
  auto e = Evaluate(c);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("QE ISVSVN 6 is below every TCB level"));
}

TEST(TcbEvaluationTest, QeIdentityMismatchNamesTheField) {
  Case c = UpToDate();
  c.qe.isv_prod_id = 1;
  auto e = Evaluate(c);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("ISVPRODID mismatch: expected 1, actual 2"));
}

TEST(TcbEvaluationTest, MrSignerSeamMismatchNamesTheModule) {
  Case c = UpToDate();
  c.tcb_info.tdx_module_identities[1].mr_signer[0] = 0xAB;
  auto e = Evaluate(c);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("TDX module identity TDX_01: MRSIGNERSEAM mismatch: "
                        "expected ab00"));
}

TEST(TcbEvaluationTest, SeamAttributesOutsideTheIdentityAreRefused) {
  Case c = UpToDate();
  c.quote.body.seam_attributes = 1;
  auto e = Evaluate(c);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("SEAM attributes under mask ffffffffffffffff "
                        "mismatch: expected 0000000000000000, actual "
                        "0000000000000001"));
}

TEST(TcbEvaluationTest, UnknownTdxModuleIdentityIsNotSupported) {
  Case c = UpToDate();
  c.tcb_info.tdx_module_identities.pop_back();  // drops TDX_01
  auto e = Evaluate(c);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("names TDX module identity TDX_01, which the TCB "
                        "info does not list"));
}

TEST(TcbEvaluationTest, ModuleVersionZeroUsesTdxModuleAndAllComponents) {
  Case c = UpToDate();
  c.quote.body.tee_tcb_svn[1] = 0;  // then TEE_TCB_SVN[0] = 6 >= 5 counts
  auto e = Evaluate(c);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->tdx_module_id, "");
  EXPECT_EQ(e->status, "UpToDate");
  c.quote.body.tee_tcb_svn[0] = 4;  // below the level's component 0 (5)
  e = Evaluate(c);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("TEE_TCB_SVN[0] of the quote is 4, the level needs 5"));
}

}  // namespace
}  // namespace gputravel::tdx
