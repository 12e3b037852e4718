#include "keyxfer/tdx/pck_extensions.h"

#include <array>
#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/hex.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/testdata.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;

PckExtensions LeafOf(const std::string& quote_bytes) {
  auto quote = ParseQuote(quote_bytes);
  EXPECT_TRUE(quote.ok()) << quote.status();
  auto ext = ParsePckExtensionsPem(quote->pck_chain_pem.at(0));
  EXPECT_TRUE(ext.ok()) << ext.status();
  return ext.ok() ? *ext : PckExtensions{};
}

TEST(PckExtensionsTest, ReadsTheUpToDateQuotesPlatform) {
  // Values as `openssl asn1parse` shows them in the leaf's 1.2.840.113741.1.13.1.
  PckExtensions ext = LeafOf(testing::DcapQuote());
  EXPECT_EQ(HexEncode(ext.fmspc), "b0c06f000000");
  EXPECT_EQ(HexEncode(ext.pce_id), "0000");
  EXPECT_EQ(ext.pce_svn, 11);
  EXPECT_EQ(HexEncode(ext.sgx_tcb_components), "03030202040100050000000000000000");
  EXPECT_EQ(HexEncode(ext.cpu_svn), "03030202040100050000000000000000");
  EXPECT_EQ(HexEncode(ext.ppid), "811dca2a26b952e85bb6448b097ba4fd");
  EXPECT_EQ(ext.sgx_type, 1);
}

TEST(PckExtensionsTest, ReadsTheOutdatedQuotesPlatform) {
  PckExtensions ext = LeafOf(testing::DcapOutdatedQuote());
  EXPECT_EQ(HexEncode(ext.fmspc), "90c06f000000");
  EXPECT_EQ(ext.pce_svn, 13);
  EXPECT_EQ(ext.sgx_tcb_components[7], 3);  // component 8
}

TEST(PckExtensionsTest, CertificateWithoutSgxExtensionsIsRefused) {
  auto ext = ParsePckExtensionsPem(testing::RootCaPem());
  ASSERT_FALSE(ext.ok());
  EXPECT_THAT(std::string(ext.status().message()),
              HasSubstr("1.2.840.113741.1.13.1 is missing"));
}

TEST(PckExtensionsTest, GarbageIsRefused) {
  auto ext = ParsePckExtensionsPem("not a certificate");
  ASSERT_FALSE(ext.ok());
  EXPECT_THAT(std::string(ext.status().message()),
              HasSubstr("PCK certificate does not parse"));
}

}  // namespace
}  // namespace gputravel::tdx
