#include "keyxfer/tdx/collateral.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/hex.h"
#include "keyxfer/tdx/openssl_util.h"
#include "keyxfer/tdx/test_pki.h"
#include "keyxfer/tdx/testdata.h"
#include "nlohmann/json.hpp"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;

absl::Time Utc(int y, int m, int d, int hh = 0, int mm = 0, int ss = 0) {
  return absl::FromCivil(absl::CivilSecond(y, m, d, hh, mm, ss),
                         absl::UTCTimeZone());
}

class CollateralTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto root = ParsePemCertificate(testing::RootCaPem());
    ASSERT_TRUE(root.ok());
    root_ = std::move(*root);
    auto b = ParseCollateralBundle(testing::DcapQuoteCollateral(), "test");
    ASSERT_TRUE(b.ok()) << b.status();
    bundle_ = *b;
  }

  absl::Status Verify(const CollateralBundle& b,
                      absl::Time at = testing::DcapQuoteValidTime()) {
    return VerifyCollateral(b, root_.get(), at).status();
  }

  OsslPtr<X509> root_;
  CollateralBundle bundle_;
};

TEST_F(CollateralTest, BothRealBundlesVerifyInsideTheirValidity) {
  auto v = VerifyCollateral(bundle_, root_.get(), testing::DcapQuoteValidTime());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(HexEncode(v->tcb_info.fmspc), "b0c06f000000");
  EXPECT_EQ(v->qe_identity.id, "TD_QE");
  EXPECT_EQ(v->pck_crl.next_update, Utc(2025, 7, 19, 10, 0, 35));
  EXPECT_THAT(v->pck_crl.issuer, HasSubstr("Intel SGX PCK Platform CA"));
  EXPECT_EQ(v->EarliestNextUpdate(), Utc(2025, 7, 19, 10, 0, 35));

  auto outdated =
      ParseCollateralBundle(testing::DcapOutdatedQuoteCollateral(), "test");
  ASSERT_TRUE(outdated.ok()) << outdated.status();
  auto v2 = VerifyCollateral(*outdated, root_.get(),
                             testing::DcapOutdatedQuoteValidTime());
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(HexEncode(v2->tcb_info.fmspc), "90c06f000000");
}

TEST_F(CollateralTest, AlteredTcbInfoBodyFailsItsSignature) {
  CollateralBundle b = bundle_;
  b.tcb_info = absl::StrReplaceAll(
      b.tcb_info, {{"\"tcbStatus\":\"OutOfDate\"", "\"tcbStatus\":\"UpToDate\""}});
  ASSERT_NE(b.tcb_info, bundle_.tcb_info);
  absl::Status s = Verify(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("TCB info signature: does not verify over the body"));
}

TEST_F(CollateralTest, AlteredTcbInfoSignatureFails) {
  CollateralBundle b = bundle_;
  b.tcb_info_signature[10] ^= 1;
  EXPECT_THAT(std::string(Verify(b).message()),
              HasSubstr("TCB info signature: does not verify"));
}

TEST_F(CollateralTest, TcbInfoSignedByAnotherIntelCertificateFails) {
  // A valid chain to Intel's root, but not the key that signed the body.
  CollateralBundle b = bundle_;
  b.tcb_info_issuer_chain = b.pck_crl_issuer_chain;
  EXPECT_THAT(std::string(Verify(b).message()),
              HasSubstr("TCB info signature: does not verify over the body "
                        "with the key of /CN=Intel SGX PCK Platform CA"));
}

TEST_F(CollateralTest, TcbInfoChainToAnotherRootFails) {
  CollateralBundle b = bundle_;
  b.tcb_info_issuer_chain = testing::ReadTestFile("impostor_root_ca.pem");
  absl::Status s = Verify(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("TCB info issuer chain does not verify to the pinned "
                        "Intel SGX Root CA"));
}

TEST_F(CollateralTest, AlteredQeIdentityBodyFails) {
  CollateralBundle b = bundle_;
  b.qe_identity = absl::StrReplaceAll(b.qe_identity,
                                      {{"\"isvsvn\":4", "\"isvsvn\":3"}});
  ASSERT_NE(b.qe_identity, bundle_.qe_identity);
  EXPECT_THAT(std::string(Verify(b).message()),
              HasSubstr("QE identity signature: does not verify"));
}

TEST_F(CollateralTest, ExpiredTcbInfoFailsNamingNextUpdate) {
  absl::Status s = Verify(bundle_, Utc(2025, 7, 19, 10, 16, 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("TCB info: expired: nextUpdate "
                        "2025-07-19T10:16:03+00:00 is not after the "
                        "verification time 2025-07-19T10:16:04+00:00"));
}

TEST_F(CollateralTest, ExpiredPckCrlFails) {
  // The PCK CRL's nextUpdate (10:00:35) comes before the TCB info's.
  absl::Status s = Verify(bundle_, Utc(2025, 7, 19, 10, 5, 0));
  EXPECT_THAT(std::string(s.message()), HasSubstr("PCK CRL: expired"));
}

TEST_F(CollateralTest, CollateralFromTheFutureFails) {
  absl::Status s = Verify(bundle_, Utc(2025, 6, 19, 10, 10, 0));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("TCB info: not yet valid at "
                        "2025-06-19T10:10:00+00:00"));
}

TEST_F(CollateralTest, CrlsSwappedAreRefusedNamingTheIssuer) {
  CollateralBundle b = bundle_;
  std::swap(b.pck_crl_der, b.root_ca_crl_der);
  absl::Status s = Verify(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("root CA CRL: issued by /CN=Intel SGX PCK Platform "
                        "CA"));
}

TEST_F(CollateralTest, AlteredPckCrlFails) {
  CollateralBundle b = bundle_;
  b.pck_crl_der[b.pck_crl_der.size() - 5] ^= 1;  // inside the signature
  absl::Status s = Verify(b);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("PCK CRL"));
}

TEST(CollateralBundleTest, ParseErrorsNameTheField) {
  std::string json = testing::DcapQuoteCollateral();
  auto extra = ParseCollateralBundle(
      absl::StrReplaceAll(json, {{"\"pck_crl\"", "\"pck_crlx\""}}), "f.json");
  EXPECT_THAT(std::string(extra.status().message()),
              HasSubstr("f.json: TDX collateral: unknown field 'pck_crlx' (did you mean 'pck_crl'? accepted: "));
  nlohmann::json j = nlohmann::json::parse(json);
  j["tcb_info_signature"] = "zz";
  auto bad_sig = ParseCollateralBundle(j.dump(), "f.json");
  EXPECT_THAT(std::string(bad_sig.status().message()),
              HasSubstr("\"tcb_info_signature\""));
  EXPECT_FALSE(ParseCollateralBundle("[]", "f.json").ok());
  auto twice = ParseCollateralBundle(
      absl::StrReplaceAll(json, {{"\"pck_crl\"", "\"root_ca_crl\": \"\", \"pck_crl\""}}),
      "f.json");
  EXPECT_EQ(twice.status().message(),
            "f.json: TDX collateral: root_ca_crl: appears twice in the same object");
}

// Revocation needs CRLs that list something; Intel's do not list these
// certificates, so a throwaway hierarchy with the same shape stands in.
class RevocationTest : public ::testing::Test {
 protected:
  RevocationTest()
      : now_(Utc(2025, 7, 1)),
        root_(testing::IssueTestCert("Test Root CA", 1, true, nullptr,
                                     now_ - absl::Hours(24 * 365),
                                     now_ + absl::Hours(24 * 365))),
        ca_(testing::IssueTestCert("Test PCK Platform CA", 2, true, &root_,
                                   now_ - absl::Hours(24),
                                   now_ + absl::Hours(24 * 30))),
        leaf_(testing::IssueTestCert("Test PCK Certificate", 77, false, &ca_,
                                     now_ - absl::Hours(24),
                                     now_ + absl::Hours(24 * 30))),
        signer_(testing::IssueTestCert("Test TCB Signing", 3, false, &root_,
                                       now_ - absl::Hours(24),
                                       now_ + absl::Hours(24 * 30))) {}

  std::vector<OsslPtr<X509>> Chain() {
    std::vector<OsslPtr<X509>> chain;
    X509_up_ref(leaf_.cert.get());
    chain.emplace_back(leaf_.cert.get());
    X509_up_ref(ca_.cert.get());
    chain.emplace_back(ca_.cert.get());
    return chain;
  }

  CollateralBundle Bundle(const std::vector<long>& root_revokes) {
    CollateralBundle b;
    b.tcb_info = nlohmann_tcb_info_;
    b.tcb_info_signature = testing::SignRaw(signer_.key.get(), b.tcb_info);
    b.tcb_info_issuer_chain = signer_.Pem() + root_.Pem();
    b.qe_identity = qe_identity_;
    b.qe_identity_signature = testing::SignRaw(signer_.key.get(), b.qe_identity);
    b.qe_identity_issuer_chain = b.tcb_info_issuer_chain;
    b.pck_crl_der = testing::IssueTestCrl(ca_, {}, now_ - absl::Hours(1),
                                          now_ + absl::Hours(24));
    b.pck_crl_issuer_chain = ca_.Pem() + root_.Pem();
    b.root_ca_crl_der = testing::IssueTestCrl(
        root_, root_revokes, now_ - absl::Hours(1), now_ + absl::Hours(24));
    return b;
  }

  void SetUp() override {
    auto real = ParseCollateralBundle(testing::DcapQuoteCollateral(), "test");
    ASSERT_TRUE(real.ok());
    nlohmann_tcb_info_ = real->tcb_info;
    qe_identity_ = real->qe_identity;
  }

  absl::Time now_;
  testing::TestCert root_, ca_, leaf_, signer_;
  std::string nlohmann_tcb_info_, qe_identity_;
};

TEST_F(RevocationTest, SelfSignedBundleVerifiesAgainstItsRoot) {
  auto v = VerifyCollateral(Bundle({}), root_.cert.get(), now_);
  EXPECT_TRUE(v.ok()) << v.status();
}

TEST_F(RevocationTest, PckLeafListedInThePckCrlIsRefusedNamingIt) {
  auto pck_crl = ParseDerCrl(
      testing::IssueTestCrl(ca_, {5, 77}, now_ - absl::Hours(1),
                            now_ + absl::Hours(24)),
      "PCK CRL");
  auto root_crl = ParseDerCrl(
      testing::IssueTestCrl(root_, {}, now_ - absl::Hours(1),
                            now_ + absl::Hours(24)),
      "root CRL");
  ASSERT_TRUE(pck_crl.ok() && root_crl.ok());
  X509_CRL* crls[] = {pck_crl->get(), root_crl->get()};
  absl::Status s = VerifyChainToRoot(Chain(), root_.cert.get(), now_, crls,
                                     "PCK certificate chain", 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("certificate revoked; depth 0 (/CN=Test PCK "
                        "Certificate, serial 4D) is revoked"));
  // Without the leaf listed, the same chain verifies.
  auto clean = ParseDerCrl(testing::IssueTestCrl(ca_, {5}, now_ - absl::Hours(1),
                                                 now_ + absl::Hours(24)),
                           "PCK CRL");
  X509_CRL* clean_crls[] = {clean->get(), root_crl->get()};
  EXPECT_TRUE(VerifyChainToRoot(Chain(), root_.cert.get(), now_, clean_crls,
                                "PCK certificate chain", 3)
                  .ok());
}

TEST_F(RevocationTest, PckCaListedInTheRootCrlIsRefused) {
  auto pck_crl = ParseDerCrl(testing::IssueTestCrl(ca_, {}, now_ - absl::Hours(1),
                                                   now_ + absl::Hours(24)),
                             "PCK CRL");
  auto root_crl = ParseDerCrl(testing::IssueTestCrl(root_, {2},
                                                    now_ - absl::Hours(1),
                                                    now_ + absl::Hours(24)),
                              "root CRL");
  X509_CRL* crls[] = {pck_crl->get(), root_crl->get()};
  absl::Status s = VerifyChainToRoot(Chain(), root_.cert.get(), now_, crls,
                                     "PCK certificate chain", 3);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("depth 1 (/CN=Test PCK Platform CA, serial 02) is "
                        "revoked"));
}

TEST_F(RevocationTest, MissingCrlIsRefused) {
  auto root_crl = ParseDerCrl(testing::IssueTestCrl(root_, {},
                                                    now_ - absl::Hours(1),
                                                    now_ + absl::Hours(24)),
                              "root CRL");
  X509_CRL* crls[] = {root_crl->get()};
  absl::Status s = VerifyChainToRoot(Chain(), root_.cert.get(), now_, crls,
                                     "PCK certificate chain", 3);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unable to get certificate CRL"));
}

TEST_F(RevocationTest, RevokedTcbSigningCertificateIsRefused) {
  absl::Status s = VerifyCollateral(Bundle({3}), root_.cert.get(), now_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("TCB info issuer chain does not verify"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("revoked"));
}

TEST_F(RevocationTest, PckCrlSignedByAnotherKeyIsRefused) {
  CollateralBundle b = Bundle({});
  b.pck_crl_der = testing::IssueTestCrl(signer_, {}, now_ - absl::Hours(1),
                                        now_ + absl::Hours(24));
  absl::Status s = VerifyCollateral(b, root_.cert.get(), now_).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("PCK CRL: issued by /CN=Test TCB Signing, expected "
                        "/CN=Test PCK Platform CA"));
}

}  // namespace
}  // namespace gputravel::tdx
