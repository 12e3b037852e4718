#ifndef GPUTRAVEL_KEYXFER_TDX_OPENSSL_UTIL_H_
#define GPUTRAVEL_KEYXFER_TDX_OPENSSL_UTIL_H_

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

// OpenSSL 3 plumbing shared by the TDX quote and collateral verifiers: owning
// pointers, error-queue handling, PEM/DER parsing and raw r||s ECDSA P-256
// signatures as Intel's formats carry them.
namespace gputravel::tdx {

struct OpensslFree {
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_CRL* p) const { X509_CRL_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(STACK_OF(X509) * p) const { sk_X509_free(p); }
};
template <typename T>
using OsslPtr = std::unique_ptr<T, OpensslFree>;

// Drains OpenSSL's thread-local error queue into a message. Every
// verification entry point clears the queue first (ERR_clear_error), so what
// this reports is what the failing call left, not what earlier code did.
std::string DrainOpensslErrors();

// One PEM certificate; errors carry OpenSSL's reason.
absl::StatusOr<OsslPtr<X509>> ParsePemCertificate(absl::string_view pem);
// Every certificate of a PEM bundle, in order; only whitespace may surround
// the blocks. `what` names the bundle in errors.
absl::StatusOr<std::vector<OsslPtr<X509>>> ParsePemChain(absl::string_view pem,
                                                         absl::string_view what);
// One DER CRL, all of `der` (trailing bytes refused).
absl::StatusOr<OsslPtr<X509_CRL>> ParseDerCrl(absl::string_view der,
                                              absl::string_view what);

// The certificate's subject as one line ("/CN=.../O=...").
std::string SubjectOf(const X509* cert);
// The name as one line.
std::string NameOf(const X509_NAME* name);
// Hex serial number of a certificate.
std::string SerialOf(const X509* cert);

// ASN1_TIME as absl::Time; nullopt-like error if it does not convert.
absl::StatusOr<absl::Time> Asn1TimeToTime(const ASN1_TIME* t);
// RFC 3339 in UTC, second precision (the form every message uses).
std::string FormatUtc(absl::Time t);

// Ok(true) if `rs` (r || s, 32 bytes each) is a valid ECDSA signature of
// SHA-256(`data`) by `key`, Ok(false) if not; an error only if OpenSSL itself
// failed.
absl::StatusOr<bool> VerifyEcdsaSha256(EVP_PKEY* key,
                                       absl::Span<const uint8_t> data,
                                       const std::array<uint8_t, 64>& rs);

// Verifies certs[0] through the untrusted certs[1..] to the pinned `root`
// at `at`; with `crls`, every certificate below the root must be covered by
// its issuer's CRL (valid at `at`, signature checked). `expected_length` (0:
// any) is the verified chain's length, root included. Errors are
// kUnauthenticated: "<chain_name> does not verify to the pinned Intel SGX
// Root CA at <time>: <OpenSSL's reason>; <which certificate, by subject>",
// naming the issuer when the failure is about the issuer (its key or a
// missing issuer), so a damaged CA certificate is not blamed on its child.
absl::Status VerifyChainToRoot(const std::vector<OsslPtr<X509>>& certs,
                               X509* root, absl::Time at,
                               absl::Span<X509_CRL* const> crls,
                               absl::string_view chain_name,
                               size_t expected_length);

// True if `key` is an EC key on P-256.
bool IsP256(EVP_PKEY* key);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_OPENSSL_UTIL_H_
