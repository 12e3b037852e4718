#include "keyxfer/tdx/quote_verifier.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <openssl/err.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/intel_root_ca.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/testdata.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;
using namespace ::gputravel::tdx::testing;  // NOLINT: test data constants

// Lowercase hex, written out here so these tests state Intel's values
// independently of the code under test.
template <size_t N>
std::string Hex(const std::array<uint8_t, N>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

// Intel's TD Quoting Enclave identity as the PCS publishes it (qe/identity for
// TDX, "id": "TD_QE"), and Intel's QE vendor id.
constexpr char kTdQeMrSignerHex[] =
    "dc9e2a7c6f948f17474e34a7fc43ed030f7c1563f1babddf6340c82e0e54a8c5";
constexpr char kIntelQeVendorIdHex[] = "939a7233f79c4ca9940a0db3957f0607";

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

  // Parses the real quote, applies `edit` to the parsed fields and verifies
  // at a valid time. Editing the parsed fields rather than the bytes keeps
  // every signature valid (they are checked over qe_report.raw and
  // signed_bytes), so the edit reaches the checks that read parsed fields.
  absl::Status VerifyEdited(const std::function<void(Quote&)>& edit) {
    auto q = ParseQuote(RealQuote());
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return q.status();
    edit(*q);
    return verifier_->Verify(*q, RealQuoteValidTime());
  }

  std::unique_ptr<QuoteVerifier> verifier_;
};

TEST_F(QuoteVerifierTest, RealQuoteVerifies) {
  EXPECT_TRUE(VerifyBytes(RealQuote()).ok()) << VerifyBytes(RealQuote());
}

TEST_F(QuoteVerifierTest, RealQuoteCarriesIntelTdQeIdentity) {
  auto q = ParseQuote(RealQuote());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(Hex(q->qe_report.mr_signer), kTdQeMrSignerHex);
  EXPECT_EQ(q->qe_report.isv_prod_id, 2);
  EXPECT_EQ(q->qe_report.misc_select, 0u);
  EXPECT_EQ(Hex(q->qe_report.attributes), "1500000000000000e700000000000000");
  EXPECT_EQ(Hex(q->header.qe_vendor_id), kIntelQeVendorIdHex);
  // The pinned constants are Intel's published values.
  EXPECT_EQ(Hex(kIntelTdQeMrSigner), kTdQeMrSignerHex);
  EXPECT_EQ(kIntelTdQeIsvProdId, 2);
  EXPECT_EQ(kIntelTdQeMiscSelect, 0u);
  EXPECT_EQ(kIntelTdQeMiscSelectMask, 0xFFFFFFFFu);
  EXPECT_EQ(Hex(kIntelTdQeAttributes), "11000000000000000000000000000000");
  EXPECT_EQ(Hex(kIntelTdQeAttributesMask), "fbffffffffffffff0000000000000000");
  EXPECT_EQ(Hex(kIntelQeVendorId), kIntelQeVendorIdHex);
  EXPECT_TRUE(VerifyEdited([](Quote&) {}).ok());
}

TEST_F(QuoteVerifierTest, QeWithOtherMrSignerFailsQeIdentity) {
  // E.g. an enclave of the platform owner's, allowed the provisioning key
  // under flexible launch control: its report is PCK-signed all the same.
  absl::Status s =
      VerifyEdited([](Quote& q) { q.qe_report.mr_signer[31] ^= 0x01; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  std::string other = kTdQeMrSignerHex;
  other.back() = '4';  // c5 ^ 01
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("QE identity: MRSIGNER is not Intel's TD "
                                     "Quoting Enclave signer: expected ",
                                     kTdQeMrSignerHex, ", actual ", other)));
}

TEST_F(QuoteVerifierTest, QeWithOtherIsvProdIdFailsQeIdentity) {
  // Intel's SGX QE (ISVPRODID 1) has the same signer but is not the TD QE.
  absl::Status s = VerifyEdited([](Quote& q) { q.qe_report.isv_prod_id = 1; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("QE identity: ISVPRODID is not the TD Quoting "
                        "Enclave's: expected 0x0002, actual 0x0001"));
}

TEST_F(QuoteVerifierTest, QeWithOtherMiscSelectFailsQeIdentity) {
  absl::Status s =
      VerifyEdited([](Quote& q) { q.qe_report.misc_select = 0x00000001; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("QE identity: MISCSELECT under mask 0xffffffff: "
                        "expected 0x00000000, actual 0x00000001"));
}

TEST_F(QuoteVerifierTest, DebugQeFailsQeIdentity) {
  // DEBUG is bit 1 of ATTRIBUTES byte 0; a debug QE's attestation key is
  // readable by the host.
  absl::Status s =
      VerifyEdited([](Quote& q) { q.qe_report.attributes[0] |= 0x02; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("QE identity: ATTRIBUTES under mask "
                        "fbffffffffffffff0000000000000000: expected "
                        "11000000000000000000000000000000, actual "
                        "13000000000000000000000000000000"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("DEBUG is set"));
}

TEST_F(QuoteVerifierTest, QeAttributesOutsideTheMaskDoNotMatter) {
  // Byte 0 bit 2 (MODE64BIT) and bytes 8..15 (XFRM) are masked out.
  EXPECT_TRUE(VerifyEdited([](Quote& q) {
                q.qe_report.attributes[0] ^= 0x04;
                q.qe_report.attributes[8] ^= 0xff;
                q.qe_report.attributes[15] ^= 0x80;
              }).ok());
}

TEST_F(QuoteVerifierTest, QeVendorIdOtherThanIntelsFailsQeIdentity) {
  absl::Status s =
      VerifyEdited([](Quote& q) { q.header.qe_vendor_id[0] ^= 0x01; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat(
                  "QE identity: QE vendor id in the quote header is not "
                  "Intel's: expected ",
                  kIntelQeVendorIdHex,
                  ", actual 929a7233f79c4ca9940a0db3957f0607")));
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
                        "certificate signature failure; the signature on "
                        "depth 0 (/CN=Intel SGX PCK Certificate"));
}

TEST_F(QuoteVerifierTest, ChangedIntermediateCertificateFailsChain) {
  absl::Status s = VerifyBytes(WithSerialNumberChanged(1));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("certificate signature failure; the signature on "
                        "depth 1 (/CN=Intel SGX PCK Platform CA"));
}

TEST_F(QuoteVerifierTest, DamagedIntermediateSubjectIsBlamedOnTheIntermediate) {
  // Base64 character 263 of the PCK CA certificate lies in its subject name:
  // it still parses, but no longer names the leaf's issuer. The reason must
  // point at the PCK CA certificate, not call the leaf bad.
  absl::Status s = VerifyBytes(WithCertificateCharChanged(1, 263));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("certificate 2 of the PCK certificate chain "
                        "(subject /1.24.4.3=Intel SGX PCK Platform CA"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("is not the issuer of certificate 1 (/CN=Intel SGX "
                        "PCK Certificate"));
}

TEST_F(QuoteVerifierTest, UnparsableIntermediateIsNamed) {
  absl::Status s = VerifyBytes(WithCertificateCharChanged(1, 0));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("certificate 2 of 3 (the PCK CA) does not parse"));
}

TEST_F(QuoteVerifierTest, StaleOpensslErrorsDoNotLeakIntoReasons) {
  // Code that ran earlier on this thread left an error on OpenSSL's queue.
  ERR_raise_data(ERR_LIB_USER, 1, "stale error from earlier code");
  absl::Status s = VerifyBytes(WithCertificateCharChanged(0, 64 * 3 + 10));
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not parse"));
  EXPECT_THAT(std::string(s.message()),
              ::testing::Not(HasSubstr("stale error from earlier code")));
  EXPECT_EQ(ERR_peek_error(), 0u) << "verification left errors queued";
}

TEST_F(QuoteVerifierTest, UnparsableCertificateFailsChain) {
  // This character sits in DER structure (a tag), so decoding fails.
  absl::Status s = VerifyBytes(WithCertificateCharChanged(0, 64 * 3 + 10));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("PCK certificate chain: certificate 1 of 3 (the PCK "
                        "leaf) does not parse"));
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

namespace gputravel::tdx {
namespace {

TEST(QuoteVerifierTrailingTest, QuoteWithAppendedTextStillVerifies) {
  std::string raw = testing::RealQuote();
  raw.replace(testing::kRealQuoteLength, 4, "junk");
  auto q = ParseQuote(raw);
  ASSERT_TRUE(q.ok()) << q.status();
  auto v = QuoteVerifier::Create(testing::RootCaPem());
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->Verify(*q, testing::RealQuoteValidTime()).ok());
}

}  // namespace
}  // namespace gputravel::tdx
