#include "cli/attest_command.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/fake_tsm_fs.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/testdata.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

const std::string kDcap = "keyxfer/tdx/testdata/dcap/";

absl::Time At(int y, int m, int d) {
  return absl::FromCivil(absl::CivilSecond(y, m, d, 0, 0, 0), absl::UTCTimeZone());
}

AttestVerifyOutput RunVerify(const std::string& quote, const std::string& collateral,
                       absl::Time at, const std::string& policy = "", bool json = false) {
  AttestVerifyInput in;
  in.quote_path = quote;
  in.collateral_path = collateral;
  in.policy_path = policy;
  in.at = at;
  in.json = json;
  return AttestVerify(in);
}

std::string TempFile(const std::string& name, const std::string& contents) {
  std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(WriteFile(path, contents).ok());
  return path;
}

TEST(AttestVerifyTest, RealQuoteWithCollateralIsAcceptedAndShown) {
  AttestVerifyOutput out = RunVerify(kDcap + "tdx_quote.dat", kDcap + "tdx_quote_collateral.json",
                               At(2025, 7, 1));
  EXPECT_EQ(out.exit_code, kAttestAccepted) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Quote: version 4, TDX 1.0 body"));
  EXPECT_THAT(out.text, HasSubstr("mrtd"));
  EXPECT_THAT(out.text, HasSubstr("PCK platform: FMSPC b0c06f000000"));
  EXPECT_THAT(out.text, HasSubstr("Intel SGX PCK Platform CA"));
  EXPECT_THAT(out.text, HasSubstr("TCB status: UpToDate (level 0 UpToDate"));
  EXPECT_THAT(out.text, HasSubstr("TDX module TDX_01 UpToDate"));
  EXPECT_THAT(out.text, HasSubstr("tcb_info_next_update: 2025-07-19T10:16:03+00:00"));
  EXPECT_THAT(out.text, HasSubstr("Verdict: accepted"));
}

TEST(AttestVerifyTest, JsonReport) {
  AttestVerifyOutput out = RunVerify(kDcap + "tdx_quote.dat", kDcap, At(2025, 7, 1), "", true);
  EXPECT_EQ(out.exit_code, kAttestAccepted) << out.text;
  auto j = nlohmann::json::parse(out.text);
  EXPECT_EQ(j["verdict"], "accepted");
  EXPECT_EQ(j["tcb_level"]["status"], "UpToDate");
  EXPECT_EQ(j["quote"]["body"]["tee_tcb_svn"], "06010300000000000000000000000000");
  EXPECT_EQ(j["pck_chain"].size(), 3u);
  EXPECT_EQ(j["verified_at"], "2025-07-01T00:00:00+00:00");
}

TEST(AttestVerifyTest, OutdatedQuoteIsRefusedNamingTheComponent) {
  // The directory holds both bundles; the quote's FMSPC picks its own.
  AttestVerifyOutput out = RunVerify(kDcap + "tdx_quote_outdated.dat", kDcap, At(2026, 3, 1));
  EXPECT_EQ(out.exit_code, kAttestRefused) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Quote: version 5, TDX 1.5 body"));
  EXPECT_THAT(out.text, HasSubstr("tee_tcb_svn_2"));
  EXPECT_THAT(out.text, HasSubstr("SGX TCB component 8 of the PCK certificate is 3"));
  EXPECT_THAT(out.text, HasSubstr("Verdict: refused"));
}

TEST(AttestVerifyTest, PolicyViolationsAreAllListed) {
  std::string policy = TempFile(
      "p.json", R"({"mrtd": ")" + std::string(96, 'a') + R"(", "min_qe_svn": 9})");
  AttestVerifyOutput out = RunVerify(kDcap + "tdx_quote.dat", kDcap + "tdx_quote_collateral.json",
                               At(2025, 7, 1), policy);
  EXPECT_EQ(out.exit_code, kAttestRefused) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Policy: TDX policy: MRTD mismatch: expected aaaa"));
  EXPECT_THAT(out.text, HasSubstr("Policy: TDX policy: QE SVN (QE report ISVSVN) below "
                                  "minimum: expected >= 9, actual 6"));
}

TEST(AttestVerifyTest, WithoutCollateralTheTcbIsNotEvaluated) {
  AttestVerifyOutput out = RunVerify(kDcap + "tdx_quote.dat", "", At(2025, 7, 1));
  EXPECT_EQ(out.exit_code, kAttestAccepted) << out.text;
  EXPECT_THAT(out.text, HasSubstr("Collateral: none given (TCB not evaluated)"));
}

TEST(AttestVerifyTest, ExpiredCollateralIsNotAuthentic) {
  AttestVerifyOutput out = RunVerify(kDcap + "tdx_quote.dat", kDcap + "tdx_quote_collateral.json",
                               At(2025, 8, 1));
  EXPECT_EQ(out.exit_code, kAttestNotAuthentic) << out.text;
  EXPECT_THAT(out.text, HasSubstr("expired"));
}

TEST(AttestVerifyTest, TamperedQuoteIsNotAuthentic) {
  auto bytes = ReadFile(kDcap + "tdx_quote.dat");
  ASSERT_TRUE(bytes.ok());
  (*bytes)[0xB8] ^= 1;  // MRTD
  AttestVerifyOutput out = RunVerify(TempFile("t.dat", *bytes), kDcap, At(2025, 7, 1));
  EXPECT_EQ(out.exit_code, kAttestNotAuthentic) << out.text;
  EXPECT_THAT(out.text, HasSubstr("quote signature does not verify"));
  auto truncated = RunVerify(TempFile("short.dat", bytes->substr(0, 100)), "", At(2025, 7, 1));
  EXPECT_EQ(truncated.exit_code, kAttestNotAuthentic);
  EXPECT_THAT(truncated.text, HasSubstr("truncated"));
}

TEST(AttestVerifyTest, MissingFileIsAnIoError) {
  AttestVerifyOutput out = RunVerify(::testing::TempDir() + "/none.dat", "", At(2025, 7, 1));
  EXPECT_EQ(out.exit_code, kAttestIoError);
}

TEST(AttestQuoteTest, ReadsAQuoteThroughConfigfsTsm) {
  const std::string root = MakeTestDir("tsm.");
  tdx::ConfigfsTsmOptions o;
  o.root = root;
  o.fs = std::make_shared<tdx::testing::FakeConfigfsTsm>(root, tdx::testing::RealQuote());
  std::array<uint8_t, 64> rd{};
  rd[0] = 0x42;
  auto quote = AttestQuote(rd, o);
  ASSERT_TRUE(quote.ok()) << quote.status();
  auto parsed = tdx::ParseQuote(*quote);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->body.report_data, rd);
  EXPECT_EQ(parsed->trailing_bytes, 0u);  // padding stripped
}

TEST(AttestQuoteTest, WithoutConfigfsTsmSaysWhatToSetUp) {
  tdx::ConfigfsTsmOptions o;
  o.root = ::testing::TempDir() + "/no/such/tsm/report";
  auto quote = AttestQuote({}, o);
  ASSERT_FALSE(quote.ok());
  EXPECT_EQ(quote.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(quote.status().message()), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace gputravel
