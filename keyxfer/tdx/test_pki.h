#ifndef GPUTRAVEL_KEYXFER_TDX_TEST_PKI_H_
#define GPUTRAVEL_KEYXFER_TDX_TEST_PKI_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "keyxfer/tdx/openssl_util.h"

namespace gputravel::tdx::testing {

// A throwaway P-256 certificate authority hierarchy for tests that need what
// no real collateral offers (a CRL that lists a certificate, a document
// signed by a key the test holds). Aborts on any OpenSSL failure.
struct TestCert {
  OsslPtr<EVP_PKEY> key;
  OsslPtr<X509> cert;
  std::string Pem() const;
};

// A certificate for a fresh key, named CN=`cn`, serial `serial`, valid
// `not_before`..`not_after`, signed by `issuer` (self-signed when null).
TestCert IssueTestCert(const std::string& cn, long serial, bool is_ca,
                       const TestCert* issuer, absl::Time not_before,
                       absl::Time not_after);

// A DER CRL issued and signed by `issuer`, listing `revoked_serials`.
std::string IssueTestCrl(const TestCert& issuer,
                         const std::vector<long>& revoked_serials,
                         absl::Time this_update, absl::Time next_update);

// ECDSA P-256 / SHA-256 signature of `data` by `key`, as r || s.
std::array<uint8_t, 64> SignRaw(EVP_PKEY* key, const std::string& data);

}  // namespace gputravel::tdx::testing

#endif  // GPUTRAVEL_KEYXFER_TDX_TEST_PKI_H_
