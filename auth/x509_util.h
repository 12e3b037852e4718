#ifndef GPUTRAVEL_AUTH_X509_UTIL_H_
#define GPUTRAVEL_AUTH_X509_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct x509_st X509;
typedef struct evp_pkey_st EVP_PKEY;

namespace gputravel {

// Small OpenSSL 3 helpers shared by the auth/ libraries (not a public API of
// the project; keyxfer/x509.h is the general one).

struct X509Deleter {
  void operator()(X509* x) const;
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;

struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const;
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

// One certificate, PEM (first block) or DER. Null if neither parses.
X509Ptr ParseCertificate(absl::string_view pem_or_der);
// How many PEM certificate blocks (BEGIN CERTIFICATE, X509 CERTIFICATE or
// TRUSTED CERTIFICATE, the labels TLS libraries load as trust anchors) `text`
// holds. 0 for DER.
int CountPemCertificates(absl::string_view text);
// PEM private key (any PEM private-key form). Null if it does not parse.
PkeyPtr ParsePrivateKey(absl::string_view pem);

std::string CertificateToPem(X509* cert);

// OK if `cert`'s public key is the public half of `key`.
bool KeyMatchesCertificate(EVP_PKEY* key, X509* cert);

// OK if `cert` verifies against the single trust anchor `ca` now (signature,
// validity period, CA constraints). The error carries OpenSSL's reason.
absl::Status VerifyChainsTo(X509* cert, X509* ca);

// "2025-01-31T12:00:00Z" for notBefore/notAfter.
std::string NotBefore(X509* cert);
std::string NotAfter(X509* cert);
// Seconds from now until notAfter (negative if expired).
long long SecondsUntilNotAfter(X509* cert);
// Subject/issuer on one line, RFC 2253 ("CN=a,OU=holder,O=gputravel").
std::string SubjectLine(X509* cert);
std::string IssuerLine(X509* cert);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_X509_UTIL_H_
