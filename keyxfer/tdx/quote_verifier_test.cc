#include "keyxfer/tdx/quote_verifier.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/intel_root_ca.h"
#include "keyxfer/tdx/testdata.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;
using namespace ::gputravel::tdx::testing;  // NOLINT: test data constants

absl::Time At(int year, int month, int day) {
  return absl::FromCivil(absl::CivilSecond(year, month, day, 0, 0, 0),
                         absl::UTCTimeZone());
}

class QuoteVerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto v = QuoteVerifier::Create(RootCaPem());
    ASSERT_TRUE(v.ok()) << v.status();
    verifier_ = std::make_unique<QuoteVerifier>(*v);
  }

  // Parses `bytes` (which must still parse) and verifies it at a valid time.
  absl::Status VerifyBytes(const std::string& bytes,
                           absl::Time at = RealQuoteValidTime()) {
    auto q = ParseQuote(bytes);
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return q.status();
    return verifier_->Verify(*q, at);
  }

  static std::string Flipped(size_t offset) {
    std::string raw = RealQuote();
    raw[offset] ^= 0x01;
    return raw;
  }

  // Changes one base64 character of certificate `cert_index` (0 = leaf) at
  // `char_offset` into its base64 text to another base64 character.
  static std::string WithCertificateCharChanged(int cert_index,
                                                size_t char_offset) {
    std::string raw = RealQuote();
    size_t pos = kPckChainOffset;
    for (int i = 0; i < cert_index; ++i) {
      pos = raw.find("-----BEGIN CERTIFICATE-----", pos + 1);
    }
    pos += 28 + char_offset;  // past "-----BEGIN CERTIFICATE-----\n"
    raw[pos] = raw[pos] == 'A' ? 'B' : 'A';
    return raw;
  }

  // Base64 character 23 carries only the low 6 bits of DER byte 17, which is
  // inside the serial number: the certificate still parses, but its signed
  // part (TBSCertificate) differs.
  static std::string WithSerialNumberChanged(int cert_index) {
    return WithCertificateCharChanged(cert_index, 23);
  }

  std::unique_ptr<QuoteVerifier> verifier_;
};

TEST_F(QuoteVerifierTest, RealQuoteVerifies) {
  EXPECT_TRUE(VerifyBytes(RealQuote()).ok()) << VerifyBytes(RealQuote());
}

TEST_F(QuoteVerifierTest, RealQuoteVerifiesWithEmbeddedRootAndWithoutPadding) {
  auto v = QuoteVerifier::Create(kIntelSgxRootCaPem);
  ASSERT_TRUE(v.ok()) << v.status();
  auto q = ParseQuote(RealQuote().substr(0, kRealQuoteLength));
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(v->Verify(*q, At(2030, 6, 1)).ok());
}

TEST_F(QuoteVerifierTest, FlippedBodyByteFailsQuoteSignature) {
  absl::Status s = VerifyBytes(Flipped(kMrtdOffset + 5));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("quote signature does not verify"));
}

TEST_F(QuoteVerifierTest, FlippedHeaderByteFailsQuoteSignature) {
  absl::Status s = VerifyBytes(Flipped(0x1C));  // user data
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("quote signature does not verify"));
}

TEST_F(QuoteVerifierTest, FlippedReportDataFailsQuoteSignature) {
  absl::Status s = VerifyBytes(Flipped(kReportDataOffset));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("quote signature does not verify"));
}

TEST_F(QuoteVerifierTest, FlippedQuoteSignatureByteFails) {
  absl::Status s = VerifyBytes(Flipped(kSignatureOffset + 40));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("quote signature does not verify"));
}

TEST_F(QuoteVerifierTest, FlippedQeReportByteFailsQeReportSignature) {
  absl::Status s = VerifyBytes(Flipped(kQeReportOffset + 0x40));  // MRENCLAVE
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("QE report signature does not verify"));
}

TEST_F(QuoteVerifierTest, FlippedQeReportSignatureByteFails) {
  absl::Status s = VerifyBytes(Flipped(kQeReportSignatureOffset + 3));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("QE report signature does not verify"));
}

TEST_F(QuoteVerifierTest, FlippedAttestationKeyFailsQeReportBinding) {
  absl::Status s = VerifyBytes(Flipped(kAttestationKeyOffset + 7));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("QE report data does not bind the attestation key"));
}

TEST_F(QuoteVerifierTest, FlippedQeAuthDataFailsQeReportBinding) {
  absl::Status s = VerifyBytes(Flipped(kQeReportSignatureOffset + 64 + 2));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("QE report data does not bind the attestation key"));
}

TEST_F(QuoteVerifierTest, ChangedLeafCertificateFailsChain) {
  absl::Status s = VerifyBytes(WithSerialNumberChanged(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("PCK certificate chain does not verify to the pinned "
                        "Intel SGX Root CA at 2025-01-01T00:00:00+00:00: "
                        "certificate signature failure (depth 0, /CN=Intel "
                        "SGX PCK Certificate"));
}

TEST_F(QuoteVerifierTest, ChangedIntermediateCertificateFailsChain) {
  absl::Status s = VerifyBytes(WithSerialNumberChanged(1));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("certificate signature failure (depth 1, /CN=Intel "
                        "SGX PCK Platform CA"));
}

TEST_F(QuoteVerifierTest, UnparsableCertificateFailsChain) {
  // This character sits in DER structure (a tag), so decoding fails.
  absl::Status s = VerifyBytes(WithCertificateCharChanged(0, 64 * 3 + 10));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("PCK certificate chain: certificate 1 of 3 does not "
                        "parse"));
}

TEST_F(QuoteVerifierTest, ChainWithOnlyTheLeafFails) {
  auto q = ParseQuote(RealQuote());
  ASSERT_TRUE(q.ok());
  q->pck_chain_pem.resize(1);
  absl::Status s = verifier_->Verify(*q, RealQuoteValidTime());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("PCK certificate chain has 1 certificate(s)"));
}

TEST_F(QuoteVerifierTest, ChainWithoutTheRootCopyStillVerifies) {
  // The pinned root is the anchor; the quote's copy of it is not needed.
  auto q = ParseQuote(RealQuote());
  ASSERT_TRUE(q.ok());
  q->pck_chain_pem.resize(2);
  EXPECT_TRUE(verifier_->Verify(*q, RealQuoteValidTime()).ok());
}

TEST_F(QuoteVerifierTest, WrongRootCaFails) {
  // Same subject name as Intel's root, different key: must not be accepted.
  auto impostor = QuoteVerifier::Create(ReadTestFile("impostor_root_ca.pem"));
  ASSERT_TRUE(impostor.ok()) << impostor.status();
  auto q = ParseQuote(RealQuote());
  ASSERT_TRUE(q.ok());
  absl::Status s = impostor->Verify(*q, RealQuoteValidTime());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("PCK certificate chain does not verify to the pinned "
                        "Intel SGX Root CA"));
  // The quote's own copy of the real root is not trusted: it is just a
  // self-signed certificate the chain could not anchor.
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("self-signed certificate in certificate chain"));
}

TEST_F(QuoteVerifierTest, TimeAfterValidityFails) {
  absl::Status s = VerifyBytes(RealQuote(), At(2032, 1, 1));
  EXPECT_THAT(std::string(s.message()), HasSubstr("certificate has expired"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("2032-01-01T00:00:00"));
}

TEST_F(QuoteVerifierTest, TimeBeforeValidityFails) {
  absl::Status s = VerifyBytes(RealQuote(), At(2024, 1, 1));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("certificate is not yet valid"));
}

TEST(QuoteVerifierCreateTest, RefusesRootThatIsNotPem) {
  auto v = QuoteVerifier::Create("not a certificate");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("root CA certificate does not parse"));
}

}  // namespace
}  // namespace gputravel::tdx
