#include "keyxfer/tdx/intel_root_ca.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/testdata.h"
#include "util/hex.h"

namespace gputravel::tdx {
namespace {

TEST(IntelRootCaTest, MatchesTheCarriedCopy) {
  EXPECT_EQ(absl::StripAsciiWhitespace(absl::string_view(kIntelSgxRootCaPem)),
            absl::StripAsciiWhitespace(testing::RootCaPem()));
}

TEST(IntelRootCaTest, HasThePublishedFingerprint) {
  BIO* bio = BIO_new_mem_buf(kIntelSgxRootCaPem, -1);
  ASSERT_NE(bio, nullptr);
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(cert, nullptr);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ASSERT_EQ(X509_digest(cert, EVP_sha256(), md, &len), 1);
  X509_free(cert);
  EXPECT_EQ(HexEncode(absl::MakeConstSpan(md, len)),
            "44a0196b2b99f889b8e149e95b807a350e7424964399e885a7cbb8ccfab674d3");
}

}  // namespace
}  // namespace gputravel::tdx
