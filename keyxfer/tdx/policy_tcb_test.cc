// Policy fields beyond the TD report's measurements: fixed bits, TDX 1.5
// fields, QE/PCE SVNs and the TCB level under Intel's collateral, on the
// real DCAP quotes.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/collateral.h"
#include "keyxfer/tdx/pck_extensions.h"
#include "keyxfer/tdx/policy.h"
#include "keyxfer/tdx/tcb_evaluation.h"
#include "keyxfer/tdx/testdata.h"

namespace gputravel::tdx {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

Policy MustParse(const std::string& json) {
  auto p = Policy::FromJson(json);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Policy{};
}

Quote MustQuote(const std::string& bytes) {
  auto q = ParseQuote(bytes);
  EXPECT_TRUE(q.ok()) << q.status();
  return *q;
}

// The real UpToDate quote evaluated under its collateral, with the first
// level made unreachable (PCESVN 12 > 11) so the OutOfDate level with its
// 14 advisories matches, as on a platform that missed an update.
TcbEvaluation OutOfDateEvaluation(const Quote& quote) {
  auto b = ParseCollateralBundle(testing::DcapQuoteCollateral(), "test");
  auto info = ParseTcbInfo(b->tcb_info);
  auto qe = ParseQeIdentity(b->qe_identity);
  info->levels[0].pce_svn = 12;
  auto pck = ParsePckExtensionsPem(quote.pck_chain_pem[0]);
  auto e = EvaluateTcb(quote, *pck, *info, *qe);
  EXPECT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->status, "OutOfDate");
  return *e;
}

TcbEvaluation UpToDateEvaluation(const Quote& quote) {
  auto b = ParseCollateralBundle(testing::DcapQuoteCollateral(), "test");
  auto info = ParseTcbInfo(b->tcb_info);
  auto qe = ParseQeIdentity(b->qe_identity);
  auto pck = ParsePckExtensionsPem(quote.pck_chain_pem[0]);
  auto e = EvaluateTcb(quote, *pck, *info, *qe);
  EXPECT_TRUE(e.ok()) << e.status();
  return *e;
}

TEST(PolicyTcbTest, DefaultPolicyAcceptsUpToDate) {
  Quote q = MustQuote(testing::DcapQuote());
  TcbEvaluation e = UpToDateEvaluation(q);
  EXPECT_THAT(MustParse("{}").Violations(q, nullptr, &e,
                                         testing::DcapQuoteValidTime()),
              IsEmpty());
}

TEST(PolicyTcbTest, StrictPolicyRefusesOutOfDateNamingStatusAndAdvisories) {
  Quote q = MustQuote(testing::DcapQuote());
  TcbEvaluation e = OutOfDateEvaluation(q);
  auto v = MustParse("{}").Violations(q, nullptr, &e,
                                      testing::DcapQuoteValidTime());
  ASSERT_THAT(v, SizeIs(2));
  EXPECT_THAT(v[0], HasSubstr("TCB status not allowed: expected one of "
                              "[UpToDate], actual OutOfDate (advisories: "
                              "INTEL-SA-00106, INTEL-SA-00115"));
  EXPECT_THAT(v[1], HasSubstr("advisory IDs not allowed: expected only [], "
                              "actual also INTEL-SA-00106"));
}

TEST(PolicyTcbTest, PermissivePolicyAcceptsOutOfDate) {
  Quote q = MustQuote(testing::DcapQuote());
  TcbEvaluation e = OutOfDateEvaluation(q);
  std::string ids;
  for (const std::string& id : e.advisory_ids) {
    ids += (ids.empty() ? "\"" : ", \"") + id + "\"";
  }
  Policy p = MustParse(R"({"allowed_tcb_statuses": ["UpToDate", "OutOfDate"],
                           "allowed_advisory_ids": [)" + ids + "]}");
  EXPECT_THAT(p.Violations(q, nullptr, &e, testing::DcapQuoteValidTime()),
              IsEmpty());
  // Allowing the status but not every advisory still refuses, naming it.
  Policy partial = MustParse(
      R"({"allowed_tcb_statuses": ["OutOfDate"],
          "allowed_advisory_ids": ["INTEL-SA-00106"]})");
  auto v = partial.Violations(q, nullptr, &e, testing::DcapQuoteValidTime());
  ASSERT_THAT(v, SizeIs(1));
  EXPECT_THAT(v[0], HasSubstr("expected only [INTEL-SA-00106], actual also "
                              "INTEL-SA-00115"));
}

TEST(PolicyTcbTest, CollateralAgeIsLimited) {
  Quote q = MustQuote(testing::DcapQuote());
  TcbEvaluation e = UpToDateEvaluation(q);
  auto v = MustParse(R"({"max_collateral_age": "24h"})")
               .Violations(q, nullptr, &e, testing::DcapQuoteValidTime());
  ASSERT_THAT(v, SizeIs(1));
  EXPECT_THAT(v[0], HasSubstr("collateral too old: expected issued within "
                              "24h of 2025-07-01T00:00:00+00:00, actual "
                              "issued 2025-06-19T10:16:03+00:00"));
  EXPECT_THAT(MustParse(R"({"max_collateral_age": "720h"})")
                  .Violations(q, nullptr, &e, testing::DcapQuoteValidTime()),
              IsEmpty());
}

// A PCK CRL older than the limit is too old even when the TCB info and QE
// identity are fresh: the host could otherwise pair fresh TCB info with a
// still-unexpired PCK CRL from before the PCK certificate's revocation.
TEST(PolicyTcbTest, CollateralAgeCoversThePckCrl) {
  Quote q = MustQuote(testing::DcapQuote());
  TcbEvaluation e = UpToDateEvaluation(q);
  Policy p = MustParse(R"({"max_collateral_age": "720h"})");
  EXPECT_THAT(p.Violations(q, nullptr, &e, testing::DcapQuoteValidTime()),
              IsEmpty());
  e.pck_crl_this_update = absl::FromCivil(absl::CivilSecond(2025, 5, 1, 0, 0, 0),
                                          absl::UTCTimeZone());
  auto v = p.Violations(q, nullptr, &e, testing::DcapQuoteValidTime());
  ASSERT_THAT(v, SizeIs(1));
  EXPECT_THAT(v[0], HasSubstr("collateral too old: expected issued within "
                              "720h of 2025-07-01T00:00:00+00:00, actual "
                              "issued 2025-05-01T00:00:00+00:00"));
}

TEST(PolicyTcbTest, FixedBitsNameFieldExpectedAndActual) {
  Quote q = MustQuote(testing::DcapQuote());
  // XFAM e7 02 06 00.. (little-endian) is 0x00000000000602e7; TD attributes
  // 00 00 00 10.. is 0x0000000010000000 (SEPT_VE_DISABLE).
  Policy ok = MustParse(R"({"xfam": {"mask": "00000000000000ff",
                                     "value": "00000000000000e7"},
                            "td_attributes": {"mask": "00000000ffffffff",
                                              "value": "0000000010000000"}})");
  EXPECT_THAT(ok.Violations(q, nullptr, nullptr, absl::Now()), IsEmpty());
  Policy bad = MustParse(R"({"xfam": {"mask": "00000000000000ff",
                                      "value": "00000000000000e6"},
                             "td_attributes": {"mask": "0000000010000000",
                                               "value": "0000000000000000"}})");
  auto v = bad.Violations(q, nullptr, nullptr, absl::Now());
  ASSERT_THAT(v, SizeIs(2));
  EXPECT_EQ(v[0],
            "TDX policy: XFAM fixed bits mismatch under mask 00000000000000ff: "
            "expected 00000000000000e6, actual 00000000000000e7 (XFAM "
            "00000000000602e7)");
  EXPECT_THAT(v[1], HasSubstr("TD attributes fixed bits mismatch under mask "
                              "0000000010000000: expected 0000000000000000, "
                              "actual 0000000010000000"));
  EXPECT_FALSE(Policy::FromJson(R"({"xfam": {"mask": "00", "value": "00"}})")
                   .ok());
  EXPECT_FALSE(Policy::FromJson(R"({"xfam": {"mask": "0000000000000001",
                                             "value": "0000000000000002"}})")
                   .ok());
}

TEST(PolicyTcbTest, QeAndPceSvnMinimums) {
  Quote q = MustQuote(testing::DcapQuote());
  auto v = MustParse(R"({"min_qe_svn": 7, "min_pce_svn": 12})")
               .Violations(q, nullptr, nullptr, absl::Now());
  EXPECT_THAT(v, ElementsAre(HasSubstr("QE SVN (QE report ISVSVN) below "
                                       "minimum: expected >= 7, actual 6"),
                             HasSubstr("PCE SVN (PCK certificate PCESVN) "
                                       "below minimum: expected >= 12, "
                                       "actual 11")));
  EXPECT_THAT(MustParse(R"({"min_qe_svn": 6, "min_pce_svn": 11})")
                  .Violations(q, nullptr, nullptr, absl::Now()),
              IsEmpty());
}

TEST(PolicyTcbTest, Tdx15FieldsOnAV5Quote) {
  Quote q = MustQuote(testing::DcapOutdatedQuote());
  ASSERT_TRUE(q.body.tee_tcb_svn_2.has_value());
  // TEE_TCB_SVN_2 0d 01 03 00..; MRSERVICETD all zeros.
  const std::string zeros(96, '0');
  EXPECT_THAT(MustParse(R"({"min_tee_tcb_svn_2": "0d010300000000000000000000000000",
                            "mrservicetd": ")" + zeros + "\"}")
                  .Violations(q, nullptr, nullptr, absl::Now()),
              IsEmpty());
  auto v = MustParse(R"({"min_tee_tcb_svn_2": "0e000000000000000000000000000000",
                         "mrservicetd": ")" + std::string(96, 'a') + "\"}")
               .Violations(q, nullptr, nullptr, absl::Now());
  EXPECT_THAT(v, ElementsAre(HasSubstr("TEE_TCB_SVN_2 below minimum at "
                                       "component 0 (0x0d < 0x0e)"),
                             HasSubstr("MRSERVICETD mismatch: expected aaaa")));
}

TEST(PolicyTcbTest, Tdx15FieldsRefuseATdx10Body) {
  Quote q = MustQuote(testing::DcapQuote());
  auto v = MustParse(R"({"mrservicetd": ")" + std::string(96, '0') + "\"}")
               .Violations(q, nullptr, nullptr, absl::Now());
  EXPECT_THAT(v, ElementsAre(HasSubstr("MRSERVICETD: expected a pinned value, "
                                       "actual absent (a TDX 1.0 body")));
}

TEST(PolicyTcbTest, EveryViolationIsListed) {
  Quote q = MustQuote(testing::DcapQuote());
  std::array<uint8_t, 64> other{};
  other[0] = 1;
  auto v = MustParse(R"({"mrtd": ")" + std::string(96, 'a') +
                     R"(", "mrowner": ")" + std::string(96, 'b') +
                     R"(", "mrconfigid": ")" + std::string(96, 'c') +
                     R"(", "mrownerconfig": ")" + std::string(96, 'd') + "\"}")
               .Violations(q, &other, nullptr, absl::Now());
  EXPECT_THAT(v, ElementsAre(HasSubstr("MRTD mismatch"),
                             HasSubstr("MRCONFIGID mismatch"),
                             HasSubstr("MROWNER mismatch"),
                             HasSubstr("MROWNERCONFIG mismatch"),
                             HasSubstr("REPORTDATA mismatch")));
}

TEST(PolicyTcbTest, UnknownStatusIsRefused) {
  auto p = Policy::FromJson(R"({"allowed_tcb_statuses": ["Fine"]})");
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("\"Fine\" is not a TCB status Intel defines"));
  EXPECT_FALSE(Policy::FromJson(R"({"max_collateral_age": "soon"})").ok());
  EXPECT_FALSE(Policy::FromJson(R"({"min_qe_svn": -1})").ok());
}

}  // namespace
}  // namespace gputravel::tdx
