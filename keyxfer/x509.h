#ifndef GPUTRAVEL_KEYXFER_X509_H_
#define GPUTRAVEL_KEYXFER_X509_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/ec_key.h"

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

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_X509_H_
