#include "keyxfer/tdx/tdx_attester.h"

#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/fake_tsm_fs.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/testdata.h"
#include "util/hex.h"
#include "util/test_dir.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;
using namespace ::gputravel::tdx::testing;  // NOLINT: test data constants

const ReportData kZeros{};

// A policy pinning the real quote's MRTD, RTMRs and TCB: what TdxVerifier
// requires, with the values the real quote must match.
Policy RealQuotePolicy() {
  auto q = ParseQuote(RealQuote());
  EXPECT_TRUE(q.ok()) << q.status();
  if (!q.ok()) return Policy{};
  const TdReportBody& body = q->body;
  std::string json = absl::StrCat(
      R"({"mrtd": ")", HexEncode(body.mr_td), R"(", "rtmr0": ")",
      HexEncode(body.rtmr[0]), R"(", "rtmr1": ")", HexEncode(body.rtmr[1]),
      R"(", "rtmr2": ")", HexEncode(body.rtmr[2]), R"(", "rtmr3": ")",
      HexEncode(body.rtmr[3]),
      R"(", "allow_debug": false, "min_tee_tcb_svn": )"
      R"("04010700000000000000000000000000", "require_report_data": true})");
  auto p = Policy::FromJson(json);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Policy{};
}

ReportData Pattern(uint8_t seed) {
  ReportData rd;
  for (size_t i = 0; i < rd.size(); ++i) rd[i] = static_cast<uint8_t>(seed ^ i);
  return rd;
}

// Passes everything to the fake but rewrites what outblob reads return.
class RewritingFs : public TsmFs {
 public:
  RewritingFs(std::shared_ptr<TsmFs> inner,
              std::function<void(std::string*)> rewrite)
      : inner_(std::move(inner)), rewrite_(std::move(rewrite)) {}
  int MakeDir(const std::string& p) override { return inner_->MakeDir(p); }
  int RemoveDir(const std::string& p) override { return inner_->RemoveDir(p); }
  int WriteFile(const std::string& p, absl::string_view d) override {
    return inner_->WriteFile(p, d);
  }
  int ReadFile(const std::string& p, std::string* c) override {
    int rc = inner_->ReadFile(p, c);
    if (rc == 0 && p.size() >= 8 && p.substr(p.size() - 8) == "/outblob") {
      rewrite_(c);
    }
    return rc;
  }

 private:
  std::shared_ptr<TsmFs> inner_;
  std::function<void(std::string*)> rewrite_;
};

class TdxAttesterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTestDir("tsm.");
    fake_ = std::make_shared<FakeConfigfsTsm>(root_, RealQuote());
  }

  ConfigfsTsmOptions Options(std::shared_ptr<TsmFs> fs) {
    ConfigfsTsmOptions o;
    o.root = root_;
    o.fs = std::move(fs);
    o.initial_backoff = absl::Milliseconds(1);
    return o;
  }

  std::string root_;
  std::shared_ptr<FakeConfigfsTsm> fake_;
};

TEST_F(TdxAttesterTest, AttestReturnsQuoteWithTheReportData) {
  TdxAttester tdx(Options(fake_));
  Attester& attester = tdx;
  auto evidence = attester.Attest(Pattern(3));
  ASSERT_TRUE(evidence.ok()) << evidence.status();
  EXPECT_EQ(evidence->format(), "tdx-quote-v4");
  EXPECT_EQ(evidence->blob().size(), 8000u);  // outblob as configfs returned it
  auto q = ParseQuote(evidence->blob());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->body.report_data, Pattern(3));
}

TEST_F(TdxAttesterTest, AttestRefusesQuoteForOtherReportData) {
  auto fs = std::make_shared<RewritingFs>(fake_, [](std::string* blob) {
    (*blob)[kReportDataOffset + 1] ^= 0x40;
  });
  TdxAttester attester(Options(fs));
  auto evidence = attester.Attest(Pattern(3));
  ASSERT_FALSE(evidence.ok());
  EXPECT_THAT(std::string(evidence.status().message()),
              HasSubstr("quote for other report data"));
}

TEST_F(TdxAttesterTest, AttestRefusesMalformedOutblob) {
  auto fs = std::make_shared<RewritingFs>(
      fake_, [](std::string* blob) { blob->resize(100); });
  TdxAttester attester(Options(fs));
  auto evidence = attester.Attest(kZeros);
  ASSERT_FALSE(evidence.ok());
  EXPECT_THAT(std::string(evidence.status().message()),
              HasSubstr("unusable quote: TDX quote: truncated"));
}

TEST_F(TdxAttesterTest, AttestPassesConfigfsErrorsThrough) {
  ConfigfsTsmOptions o = Options(fake_);
  o.root = root_ + "/missing";
  TdxAttester attester(o);
  auto evidence = attester.Attest(kZeros);
  EXPECT_EQ(evidence.status().code(), absl::StatusCode::kNotFound);
}

class TdxVerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto q = ParseQuote(RealQuote());
    ASSERT_TRUE(q.ok());
    body_ = q->body;
    evidence_.set_format("tdx-quote-v4");
    evidence_.set_blob(RealQuote());
  }

  // A policy pinning the real quote's MRTD, RTMRs and TCB.
  Policy MatchingPolicy() { return RealQuotePolicy(); }

  // What TdxVerifier::Create says about `policy` (which it must refuse).
  std::string CreateError(Policy policy) {
    TdxVerifierOptions o;
    o.policy = std::move(policy);
    auto v = TdxVerifier::Create(std::move(o));
    EXPECT_FALSE(v.ok());
    if (v.ok()) return "<created>";
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(v.status().message());
  }

  std::unique_ptr<TdxVerifier> MakeVerifier(
      Policy policy, absl::Time at = RealQuoteValidTime()) {
    TdxVerifierOptions o;
    o.root_ca_pem = RootCaPem();
    o.policy = std::move(policy);
    o.clock = [at] { return at; };
    auto v = TdxVerifier::Create(std::move(o));
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? std::move(*v) : nullptr;
  }

  TdReportBody body_;
  Evidence evidence_;
};

TEST_F(TdxVerifierTest, RealQuoteWithMatchingPolicyVerifies) {
  auto v = MakeVerifier(MatchingPolicy());
  ASSERT_NE(v, nullptr);
  Verifier& verifier = *v;
  auto id = verifier.Verify(evidence_, kZeros);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->format, "tdx-quote-v4");
  EXPECT_EQ(HexEncode(id->mrtd), HexEncode(body_.mr_td));
  ASSERT_EQ(id->rtmr.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(HexEncode(id->rtmr[i]), HexEncode(body_.rtmr[i]));
  EXPECT_EQ(id->td_attributes, 0x10000000u);
  EXPECT_EQ(HexEncode(id->tee_tcb_svn), "04010700000000000000000000000000");
}

TEST_F(TdxVerifierTest, EmptyRootMeansCompiledInIntelRoot) {
  TdxVerifierOptions o;
  o.policy = MatchingPolicy();
  o.clock = [] { return RealQuoteValidTime(); };
  auto v = TdxVerifier::Create(std::move(o));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE((*v)->Verify(evidence_, kZeros).ok());
}

TEST_F(TdxVerifierTest, OtherExpectedReportDataFailsNamingReportData) {
  auto v = MakeVerifier(MatchingPolicy());
  ASSERT_NE(v, nullptr);
  auto id = v->Verify(evidence_, Pattern(1));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("REPORTDATA mismatch"));
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr(absl::StrCat("expected ", HexEncode(Pattern(1)))));
}

TEST_F(TdxVerifierTest, OtherMrtdFailsNamingMrtd) {
  Policy p = MatchingPolicy();
  p.mrtd[0][0] ^= 1;
  auto v = MakeVerifier(p);
  ASSERT_NE(v, nullptr);
  auto id = v->Verify(evidence_, kZeros);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("MRTD mismatch"));
}

TEST_F(TdxVerifierTest, OtherRtmrFailsNamingRtmr) {
  Policy p = MatchingPolicy();
  p.rtmr[2][0][47] ^= 1;
  auto v = MakeVerifier(p);
  ASSERT_NE(v, nullptr);
  EXPECT_THAT(std::string(v->Verify(evidence_, kZeros).status().message()),
              HasSubstr("RTMR2 mismatch"));
}

TEST_F(TdxVerifierTest, HigherMinimumTcbFails) {
  Policy p = MatchingPolicy();
  (*p.min_tee_tcb_svn)[0] = 5;
  auto v = MakeVerifier(p);
  ASSERT_NE(v, nullptr);
  EXPECT_THAT(std::string(v->Verify(evidence_, kZeros).status().message()),
              HasSubstr("TEE_TCB_SVN below minimum at component 0"));
}

TEST_F(TdxVerifierTest, DebugBitCannotBeForged) {
  // The real TD is not a debug TD; setting the bit breaks the signature, so a
  // DEBUG-disallowing policy cannot be met by editing the quote either way.
  auto v = MakeVerifier(MatchingPolicy());
  ASSERT_NE(v, nullptr);
  std::string blob = RealQuote();
  blob[kTdAttributesOffset] |= 1;
  evidence_.set_blob(blob);
  auto id = v->Verify(evidence_, kZeros);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("quote signature does not verify"));
}

TEST_F(TdxVerifierTest, TamperedQuoteFailsAuthenticity) {
  auto v = MakeVerifier(MatchingPolicy());
  ASSERT_NE(v, nullptr);
  std::string blob = RealQuote();
  blob[kQeReportOffset + 0x100] ^= 1;
  evidence_.set_blob(blob);
  EXPECT_THAT(std::string(v->Verify(evidence_, kZeros).status().message()),
              HasSubstr("QE report signature does not verify"));
}

TEST_F(TdxVerifierTest, ClockIsConsulted) {
  absl::Time late = absl::FromCivil(absl::CivilSecond(2034, 1, 1, 0, 0, 0),
                                    absl::UTCTimeZone());
  auto v = MakeVerifier(MatchingPolicy(), late);
  ASSERT_NE(v, nullptr);
  auto id = v->Verify(evidence_, kZeros);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("certificate has expired"));
}

TEST_F(TdxVerifierTest, RefusesOtherFormats) {
  auto v = MakeVerifier(MatchingPolicy());
  ASSERT_NE(v, nullptr);
  evidence_.set_format("dev-attester-v1");
  EXPECT_THAT(std::string(v->Verify(evidence_, kZeros).status().message()),
              HasSubstr("evidence format \"dev-attester-v1\" is not"));
  evidence_.set_format("tdx-quote-v5");
  EXPECT_THAT(std::string(v->Verify(evidence_, kZeros).status().message()),
              HasSubstr("but the quote is version 4"));
}

TEST_F(TdxVerifierTest, RefusesMalformedBlob) {
  auto v = MakeVerifier(MatchingPolicy());
  ASSERT_NE(v, nullptr);
  evidence_.set_blob(RealQuote().substr(0, 1000));
  auto id = v->Verify(evidence_, kZeros);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("truncated"));
}

TEST_F(TdxVerifierTest, CreateRefusesPolicyWithoutReportDataBinding) {
  Policy p = MatchingPolicy();
  p.require_report_data = false;
  EXPECT_THAT(CreateError(p), HasSubstr("require_report_data is false"));
}

TEST_F(TdxVerifierTest, CreateRefusesBadRoot) {
  TdxVerifierOptions o;
  o.policy = MatchingPolicy();
  o.root_ca_pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  auto v = TdxVerifier::Create(std::move(o));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("root CA certificate does not parse"));
}

TEST_F(TdxVerifierTest, CreateRefusesEmptyPolicyNamingEveryMandatoryPin) {
  // Policy{} checks only DEBUG and REPORTDATA: any non-debug TD on any
  // firmware, kernel and TDX module would pass.
  std::string e = CreateError(Policy{});
  EXPECT_THAT(e, HasSubstr("TdxVerifier: peer policy must pin mrtd, rtmr0, "
                           "rtmr1, rtmr2 and min_tee_tcb_svn; missing: mrtd, "
                           "rtmr0, rtmr1, rtmr2, min_tee_tcb_svn ("));
  EXPECT_THAT(e, HasSubstr("ACPI tables"));  // says why
}

TEST_F(TdxVerifierTest, CreateRefusesPolicyWithoutRtmr2NamingOnlyRtmr2) {
  // The same firmware and kernel with another command line or initrd.
  Policy p = MatchingPolicy();
  p.rtmr[2].clear();
  EXPECT_THAT(CreateError(p), HasSubstr("; missing: rtmr2 ("));
}

TEST_F(TdxVerifierTest, CreateRefusesPolicyWithoutMinTeeTcbSvn) {
  Policy p = MatchingPolicy();
  p.min_tee_tcb_svn.reset();
  EXPECT_THAT(CreateError(p), HasSubstr("; missing: min_tee_tcb_svn ("));
}

TEST_F(TdxVerifierTest, CreateAcceptsPlaceholderPinsAndNamesOnlyMissingOnes) {
  // Values need not match anything to be pinned; a pin of every mandatory
  // register (placeholders here) is what Create asks for. RTMR3 and the other
  // registers stay optional.
  Policy p;
  Measurement placeholder;
  placeholder.fill(0xaa);
  p.mrtd = {placeholder};
  p.rtmr[0] = {placeholder};
  p.rtmr[1] = {placeholder};
  EXPECT_THAT(CreateError(p),
              HasSubstr("; missing: rtmr2, min_tee_tcb_svn ("));
  p.rtmr[2] = {placeholder};
  p.min_tee_tcb_svn = std::array<uint8_t, 16>{};
  TdxVerifierOptions o;
  o.policy = p;
  auto v = TdxVerifier::Create(std::move(o));
  ASSERT_TRUE(v.ok()) << v.status();
}

TEST_F(TdxVerifierTest, Rtmr3AndOtherRegistersStayOptional) {
  Policy p = MatchingPolicy();
  p.rtmr[3].clear();
  ASSERT_TRUE(p.mrseam.empty() && p.mrconfigid.empty() && p.mrowner.empty() &&
              p.mrownerconfig.empty());
  auto v = MakeVerifier(p);
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->Verify(evidence_, kZeros).ok());
}

TEST_F(TdxAttesterTest, AttesterOutputVerifies) {
  // The fake's template is the real quote; with all-zero report data it hands
  // out exactly the signed original, which must pass end to end.
  TdxAttester attester(Options(fake_));
  auto evidence = attester.Attest(kZeros);
  ASSERT_TRUE(evidence.ok()) << evidence.status();
  TdxVerifierOptions o;
  o.policy = RealQuotePolicy();
  o.clock = [] { return RealQuoteValidTime(); };
  auto v = TdxVerifier::Create(std::move(o));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE((*v)->Verify(*evidence, kZeros).ok());
  // Other report data yields a quote the fake cannot sign.
  auto other = attester.Attest(Pattern(5));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*v)->Verify(*other, Pattern(5)).status().code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace gputravel::tdx

namespace gputravel::tdx {
namespace {

// TdxVerifier with Intel's collateral, on the real DCAP quotes.
class TdxVerifierCollateralTest : public ::testing::Test {
 protected:
  static Policy PinsOf(const Quote& q) {
    Policy p;
    p.mrtd = {q.body.mr_td};
    for (int i = 0; i < 3; ++i) p.rtmr[i] = {q.body.rtmr[i]};
    p.min_tee_tcb_svn = std::array<uint8_t, 16>{};
    return p;
  }

  static std::shared_ptr<CollateralStore> Store(const std::string& name,
                                                const std::string& json) {
    std::string path = TestTmpDir() + "/" + name;
    std::ofstream(path) << json;
    auto s = CollateralStore::Open(path);
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }

  static absl::StatusOr<AttestedIdentity> VerifyWith(
      const std::string& quote_bytes, const std::string& format,
      std::shared_ptr<CollateralStore> store, absl::Time at) {
    auto q = ParseQuote(quote_bytes);
    EXPECT_TRUE(q.ok());
    TdxVerifierOptions o;
    o.root_ca_pem = RootCaPem();
    o.policy = PinsOf(*q);
    o.collateral = std::move(store);
    o.clock = [at] { return at; };
    auto v = TdxVerifier::Create(std::move(o));
    EXPECT_TRUE(v.ok()) << v.status();
    Evidence e;
    e.set_format(format);
    e.set_blob(quote_bytes);
    return (*v)->Verify(e, q->body.report_data);
  }
};

TEST_F(TdxVerifierCollateralTest, UpToDateQuoteVerifiesAndReportsItsTcb) {
  auto id = VerifyWith(DcapQuote(), "tdx-quote-v4",
                       Store("a.json", DcapQuoteCollateral()),
                       DcapQuoteValidTime());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->tcb_status, "UpToDate");
  EXPECT_TRUE(id->advisory_ids.empty());
  EXPECT_EQ(id->collateral_next_update_unix,
            absl::ToUnixSeconds(absl::FromCivil(
                absl::CivilSecond(2025, 7, 19, 10, 0, 35),
                absl::UTCTimeZone())));
}

TEST_F(TdxVerifierCollateralTest, OutdatedQuoteIsRefusedNamingTheComponent) {
  auto id = VerifyWith(DcapOutdatedQuote(), "tdx-quote-v5",
                       Store("b.json", DcapOutdatedQuoteCollateral()),
                       DcapOutdatedQuoteValidTime());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("SGX TCB component 8 of the PCK certificate is 3"));
}

TEST_F(TdxVerifierCollateralTest, ExpiredCollateralIsRefused) {
  auto id = VerifyWith(DcapQuote(), "tdx-quote-v4",
                       Store("c.json", DcapQuoteCollateral()),
                       DcapQuoteValidTime() + absl::Hours(24 * 30));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("expired"));
}

TEST_F(TdxVerifierCollateralTest, TcbPolicyWithoutCollateralIsRefused) {
  TdxVerifierOptions o;
  o.policy = PinsOf(*ParseQuote(DcapQuote()));
  o.policy.allowed_tcb_statuses = {"UpToDate", "SWHardeningNeeded"};
  auto v = TdxVerifier::Create(std::move(o));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("need Intel's collateral"));
}

}  // namespace
}  // namespace gputravel::tdx
