#ifndef GPUTRAVEL_KEYXFER_X509_H_
#define GPUTRAVEL_KEYXFER_X509_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/ec_key.h"

typedef struct x509_st X509;
typedef struct evp_pkey_st EVP_PKEY;
typedef struct asn1_string_st ASN1_INTEGER;
typedef struct asn1_string_st ASN1_TIME;
typedef struct X509_name_st X509_NAME;
typedef struct X509_crl_st X509_CRL;

namespace gputravel {

// Issues a DER X.509 v3 certificate for `subject_key` with CN `common_name`,
// signed by `issuer_key`. `issuer_der` empty means self-signed (a CA). Used by
// the development PKI (device certificates, development attestation keys).
// Every field and extension (basicConstraints CA:TRUE/CA:FALSE, keyUsage,
// subjectKeyIdentifier) is checked: an error instead of a certificate that
// lacks one. Every DER input of this file must be exactly one certificate:
// trailing bytes are refused (INVALID_ARGUMENT).
absl::StatusOr<std::string> IssueCertificate(const EcKey& subject_key,
                                             absl::string_view common_name,
                                             const EcKey& issuer_key,
                                             absl::string_view issuer_der,
                                             bool is_ca, int valid_days);

// A certificate whose signature chains to `ca_der` (one level), valid now,
// that is not a CA and whose keyUsage includes digitalSignature (an identity
// whose key signs), returning its public key and common name.
struct VerifiedCertificate {
  EcKey public_key;
  std::string common_name;
};
absl::StatusOr<VerifiedCertificate> VerifyCertificate(absl::string_view cert_der,
                                                      absl::string_view ca_der);

// PEM <-> DER for single certificates.
absl::StatusOr<std::string> CertificatePemToDer(absl::string_view pem);
absl::StatusOr<std::string> CertificateDerToPem(absl::string_view der);

// Reading and inspecting certificates and keys (TLS files, pinned callers).

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

// Certificate revocation lists (the campaign's CRL).
struct CrlDeleter {
  void operator()(X509_CRL* c) const;
};
using CrlPtr = std::unique_ptr<X509_CRL, CrlDeleter>;
// One PEM CRL. Null if it does not parse. Checks nothing else.
CrlPtr ParseCrlPem(absl::string_view pem);
// The CRL as PEM; empty on failure.
std::string CrlToPem(X509_CRL* crl);
// Its cRLNumber extension; 0 if absent or negative.
long CrlNumber(X509_CRL* crl);

// OK if `cert`'s public key is the public half of `key`.
bool KeyMatchesCertificate(EVP_PKEY* key, X509* cert);
// The subject's common name ("" if none).
std::string CertificateCommonName(X509* cert);

// OK if `cert` verifies against the single trust anchor `ca` now (signature,
// validity period, CA constraints). The error carries OpenSSL's reason.
absl::Status VerifyChainsTo(X509* cert, X509* ca);

// "2025-01-31T12:00:00Z" for notBefore/notAfter.
std::string NotBefore(X509* cert);
std::string NotAfter(X509* cert);
// The same form for any ASN.1 time (a CRL's dates); "?" if unreadable.
std::string Asn1TimeString(const ASN1_TIME* t);
// A serial number in lowercase hex without leading zeros ("0" for zero).
std::string SerialHex(const ASN1_INTEGER* serial);
// Seconds from now until notAfter (negative if expired).
long long SecondsUntilNotAfter(X509* cert);
// Subject/issuer on one line, RFC 2253 ("CN=a,OU=holder,O=gputravel").
std::string SubjectLine(X509* cert);
std::string IssuerLine(X509* cert);
// Any X.509 name in that form (a certificate request's subject).
std::string NameLine(X509_NAME* name);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_X509_H_
