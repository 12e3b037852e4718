#include "keyxfer/tdx/quote.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/testdata.h"
#include "util/hex.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace ::gputravel::tdx::testing;  // NOLINT: test data constants

void PutLe16(std::string& s, size_t off, uint16_t v) {
  s[off] = static_cast<char>(v & 0xff);
  s[off + 1] = static_cast<char>(v >> 8);
}

void PutLe32(std::string& s, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[off + i] = static_cast<char>(v >> (8 * i));
}

uint32_t GetLe32(const std::string& s, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[off + i]);
  return v;
}

std::string ErrorOf(const std::string& bytes) {
  auto q = ParseQuote(bytes);
  if (q.ok()) return "<parsed>";
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(q.status().message());
}

// A v5 quote carrying the same body: version 5 and a body descriptor
// between header and body. Signatures no longer match, parsing must.
std::string ToV5(const std::string& v4, uint16_t body_type) {
  std::string q = v4.substr(0, kRealQuoteLength);
  PutLe16(q, 0, 5);
  std::string body = q.substr(kQuoteHeaderBytes, kTdReport10Bytes);
  if (body_type == kBodyTypeTdx15) body += std::string(64, '\x5a');
  std::string descriptor(6, '\0');
  PutLe16(descriptor, 0, body_type);
  PutLe32(descriptor, 2, static_cast<uint32_t>(body.size()));
  return q.substr(0, kQuoteHeaderBytes) + descriptor + body +
         q.substr(kQuoteHeaderBytes + kTdReport10Bytes);
}

TEST(QuoteTest, ParsesRealQuoteHeaderAndBody) {
  std::string raw = RealQuote();
  ASSERT_EQ(raw.size(), 8000u);
  auto q = ParseQuote(raw);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->header.version, 4);
  EXPECT_EQ(q->header.attestation_key_type, 2);
  EXPECT_EQ(q->header.tee_type, 0x81u);
  EXPECT_EQ(HexEncode(q->header.qe_vendor_id), "939a7233f79c4ca9940a0db3957f0607");
  EXPECT_EQ(HexEncode(q->body.tee_tcb_svn), "04010700000000000000000000000000");
  EXPECT_EQ(HexEncode(q->body.mr_td),
            "dae67181d3d65e073ad8f95b7907d5e927bfe9761c9ff3e9b89734a45d8954db"
            "a41394c7717cb2735396c1d04231f94a");
  EXPECT_EQ(HexEncode(q->body.rtmr[0]),
            "3fa2f61f395b7f5feefb4ec2df61297f109ad8abcd6410c1b7df60f21f37b192"
            "97fc35e544039c7e1edece752afd17f6");
  EXPECT_EQ(HexEncode(q->body.rtmr[3]), std::string(96, '0'));
  EXPECT_EQ(q->body.td_attributes, 0x10000000u);  // SEPT_VE_DISABLE, no DEBUG
  EXPECT_EQ(q->body.td_attributes & kTdAttributeDebug, 0u);
  EXPECT_EQ(HexEncode(q->body.report_data), std::string(128, '0'));
  EXPECT_FALSE(q->body.tee_tcb_svn_2.has_value());
  EXPECT_EQ(q->body_type, kBodyTypeTdx10);
  EXPECT_EQ(q->length, kRealQuoteLength);
}

TEST(QuoteTest, KeepsSignedSpansAndCertificationData) {
  std::string raw = RealQuote();
  auto q = ParseQuote(raw);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->signed_bytes.size(), kQuoteHeaderBytes + kTdReport10Bytes);
  EXPECT_EQ(0, std::memcmp(q->signed_bytes.data(), raw.data(),
                           q->signed_bytes.size()));
  EXPECT_EQ(0, std::memcmp(q->signature.data(), raw.data() + kSignatureOffset,
                           64));
  EXPECT_EQ(0, std::memcmp(q->attestation_key.data(),
                           raw.data() + kAttestationKeyOffset, 64));
  EXPECT_EQ(0, std::memcmp(q->qe_report.raw.data(),
                           raw.data() + kQeReportOffset, kQeReportBytes));
  EXPECT_EQ(0, std::memcmp(q->qe_report.report_data.data(),
                           raw.data() + kQeReportOffset + 0x140, 64));
  EXPECT_EQ(0, std::memcmp(q->qe_report_signature.data(),
                           raw.data() + kQeReportSignatureOffset, 64));
  EXPECT_EQ(q->qe_auth_data.size(), 32u);
  ASSERT_EQ(q->pck_chain_pem.size(), 3u);
  for (const auto& pem : q->pck_chain_pem) {
    EXPECT_THAT(pem, StartsWith("-----BEGIN CERTIFICATE-----"));
    EXPECT_THAT(pem, HasSubstr("-----END CERTIFICATE-----"));
  }
}

TEST(QuoteTest, AcceptsUnpaddedAndLargerZeroPadding) {
  std::string raw = RealQuote();
  EXPECT_TRUE(ParseQuote(raw.substr(0, kRealQuoteLength)).ok());
  std::string padded = raw + std::string(kMaxQuoteBytes - raw.size(), '\0');
  auto q = ParseQuote(padded);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->length, kRealQuoteLength);
}

TEST(QuoteTest, RefusesOversizedInput) {
  std::string big = RealQuote() + std::string(kMaxQuoteBytes, '\0');
  EXPECT_THAT(ErrorOf(big), HasSubstr("more than the 65536-byte limit"));
}

TEST(QuoteTest, RefusesEveryTruncation) {
  std::string raw = RealQuote();
  for (size_t n = 0; n < kRealQuoteLength; ++n) {
    auto q = ParseQuote(raw.substr(0, n));
    ASSERT_FALSE(q.ok()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(QuoteTest, TruncationErrorNamesFieldAndOffset) {
  std::string raw = RealQuote();
  EXPECT_THAT(ErrorOf(raw.substr(0, 0x64)),
              HasSubstr("truncated: MRSEAM needs 48 bytes at offset 0x40, but "
                        "the input ends at 0x64"));
  EXPECT_THAT(ErrorOf(raw.substr(0, 0x1000)),
              HasSubstr("signature data needs 4299 bytes at offset 0x27c"));
}

TEST(QuoteTest, UnsignedTrailingBytesAreCountedAndIgnored) {
  // Text after the quote, as some tools append: outside every signature.
  std::string raw = RealQuote();
  const std::string text = "appended by a tool";
  raw.replace(kRealQuoteLength, text.size(), text);
  auto q = ParseQuote(raw);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->length, kRealQuoteLength);
  EXPECT_EQ(q->trailing_bytes, raw.size() - kRealQuoteLength);
  EXPECT_EQ(q->trailing_nonzero_bytes, text.size());
  auto plain = ParseQuote(RealQuote());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->trailing_nonzero_bytes, 0u);
  EXPECT_EQ(q->signed_bytes, plain->signed_bytes);
  EXPECT_EQ(q->pck_chain_pem, plain->pck_chain_pem);
}

TEST(QuoteTest, RefusesWrongVersion) {
  std::string raw = RealQuote();
  PutLe16(raw, 0, 3);
  EXPECT_THAT(ErrorOf(raw), HasSubstr("unsupported version 3 at offset 0x0"));
}

TEST(QuoteTest, RefusesWrongAttestationKeyType) {
  std::string raw = RealQuote();
  PutLe16(raw, 2, 3);
  EXPECT_THAT(ErrorOf(raw),
              HasSubstr("unsupported attestation key type 3 at offset 0x2"));
}

TEST(QuoteTest, RefusesSgxTeeType) {
  std::string raw = RealQuote();
  PutLe32(raw, 4, 0);
  EXPECT_THAT(ErrorOf(raw),
              HasSubstr("TEE type 0x0 at offset 0x4 is not TDX"));
}

TEST(QuoteTest, RefusesSignatureDataLengthTooLong) {
  std::string raw = RealQuote();
  PutLe32(raw, kSignatureDataLengthOffset,
          GetLe32(raw, kSignatureDataLengthOffset) + 1);
  EXPECT_THAT(ErrorOf(raw),
              HasSubstr("inconsistent lengths: signature data length at "
                        "offset 0x278"));
}

TEST(QuoteTest, RefusesSignatureDataLengthTooShort) {
  std::string raw = RealQuote();
  PutLe32(raw, kSignatureDataLengthOffset,
          GetLe32(raw, kSignatureDataLengthOffset) - 1);
  EXPECT_THAT(ErrorOf(raw),
              HasSubstr("truncated: certification data needs 4165 bytes at "
                        "offset 0x302, but signature data ends at 0x1346"));
}

TEST(QuoteTest, RefusesHugeSignatureDataLength) {
  std::string raw = RealQuote();
  PutLe32(raw, kSignatureDataLengthOffset, 0xffffffffu);
  EXPECT_THAT(ErrorOf(raw), HasSubstr("truncated: signature data needs"));
}

TEST(QuoteTest, RefusesCertificationDataSizeMismatch) {
  std::string raw = RealQuote();
  PutLe32(raw, kCertDataTypeOffset + 2,
          GetLe32(raw, kCertDataTypeOffset + 2) - 1);
  // Shrinking the inner size leaves a byte of the signature data unaccounted.
  EXPECT_THAT(ErrorOf(raw), HasSubstr("inconsistent lengths"));
}

TEST(QuoteTest, RefusesWrongCertificationDataType) {
  std::string raw = RealQuote();
  PutLe16(raw, kCertDataTypeOffset, 5);
  EXPECT_THAT(ErrorOf(raw),
              HasSubstr("certification data type 5 at offset 0x2fc is not 6"));
}

TEST(QuoteTest, RefusesWrongNestedCertificationDataType) {
  std::string raw = RealQuote();
  PutLe16(raw, kNestedCertTypeOffset, 4);
  EXPECT_THAT(ErrorOf(raw),
              HasSubstr("nested certification data type 4 at offset 0x4e4 is "
                        "not 5"));
}

TEST(QuoteTest, RefusesOversizedQeAuthDataLength) {
  std::string raw = RealQuote();
  PutLe16(raw, kQeReportSignatureOffset + 64, 0xffff);
  EXPECT_THAT(ErrorOf(raw), HasSubstr("truncated: QE auth data needs 65535"));
}

TEST(QuoteTest, RefusesGarbageInPemChain) {
  std::string raw = RealQuote();
  raw[kPckChainOffset] = 'X';
  EXPECT_THAT(ErrorOf(raw),
              HasSubstr("expected \"-----BEGIN CERTIFICATE-----\" at offset "
                        "0x4ea"));
}

TEST(QuoteTest, RefusesUnterminatedPemCertificate) {
  std::string raw = RealQuote();
  size_t end = raw.rfind("-----END CERTIFICATE-----");
  ASSERT_NE(end, std::string::npos);
  raw[end + 5] = 'X';
  EXPECT_THAT(ErrorOf(raw), HasSubstr("has no \"-----END CERTIFICATE-----\""));
}

TEST(QuoteTest, ParsesVersion5Tdx10Body) {
  std::string v5 = ToV5(RealQuote(), kBodyTypeTdx10);
  auto q = ParseQuote(v5);
  ASSERT_TRUE(q.ok()) << q.status();
  auto v4 = ParseQuote(RealQuote());
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(q->header.version, 5);
  EXPECT_EQ(q->body_type, kBodyTypeTdx10);
  EXPECT_EQ(q->body.mr_td, v4->body.mr_td);
  EXPECT_EQ(q->qe_report.raw, v4->qe_report.raw);
  // The descriptor is signed too.
  EXPECT_EQ(q->signed_bytes.size(), kQuoteHeaderBytes + 6 + kTdReport10Bytes);
  EXPECT_EQ(q->length, kRealQuoteLength + 6);
}

TEST(QuoteTest, ParsesVersion5Tdx15Body) {
  auto q = ParseQuote(ToV5(RealQuote(), kBodyTypeTdx15));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->body_type, kBodyTypeTdx15);
  ASSERT_TRUE(q->body.tee_tcb_svn_2.has_value());
  ASSERT_TRUE(q->body.mr_service_td.has_value());
  EXPECT_EQ((*q->body.tee_tcb_svn_2)[0], 0x5a);
  EXPECT_EQ(q->signed_bytes.size(), kQuoteHeaderBytes + 6 + kTdReport15Bytes);
}

TEST(QuoteTest, RefusesVersion5BodyDescriptorMismatch) {
  std::string v5 = ToV5(RealQuote(), kBodyTypeTdx10);
  PutLe32(v5, kQuoteHeaderBytes + 2, kTdReport15Bytes);
  EXPECT_THAT(ErrorOf(v5),
              HasSubstr("TD report body size 648 at offset 0x32, but body "
                        "type 2 is 584 bytes"));
  PutLe16(v5, kQuoteHeaderBytes, 1);  // SGX enclave report
  EXPECT_THAT(ErrorOf(v5),
              HasSubstr("TD report body type 1 at offset 0x30 is not a TD"));
}

TEST(QuoteTest, RefusesVersion5WithoutDescriptor) {
  std::string raw = RealQuote();
  PutLe16(raw, 0, 5);  // v4 layout: TEE_TCB_SVN 04 01 read as body type
  EXPECT_THAT(ErrorOf(raw), HasSubstr("TD report body type 260 at offset"));
}

}  // namespace
}  // namespace gputravel::tdx
