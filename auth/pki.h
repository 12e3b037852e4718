#ifndef GPUTRAVEL_AUTH_PKI_H_
#define GPUTRAVEL_AUTH_PKI_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "auth/identity.h"

namespace gputravel {

// The campaign PKI behind mTLS: one CA per campaign (ECDSA P-384, SHA-384)
// and one certificate per identity, all as PEM files in one directory:
//
//   DIR/ca.pem, DIR/ca.key                   the campaign CA (key 0600)
//   DIR/<role>-<name>.pem, DIR/<role>-<name>.key   one per identity (key 0600)
//
// Nothing is ever overwritten: re-issuing means removing the files first.
// Every file is created exclusively (O_EXCL|O_NOFOLLOW), so a file or symbolic
// link that appears at one of these paths is refused, never followed. DIR must
// be writable by its owner only: a directory writable by its group or by
// others is refused (FAILED_PRECONDITION), since whoever may add or rename
// entries in it could swap a certificate or key.

// Validity limits accepted for --days.
inline constexpr int kMinValidDays = 1;
inline constexpr int kMaxValidDays = 36500;

std::string CaCertPath(const std::string& dir);
std::string CaKeyPath(const std::string& dir);
std::string IdentityCertPath(const std::string& dir, const Identity& id);
std::string IdentityKeyPath(const std::string& dir, const Identity& id);

// Creates DIR (mode 0700) if it does not exist, and writes DIR/ca.pem and
// DIR/ca.key (0600): a self-signed X.509 v3 CA, Subject O=gputravel,
// OU=campaign-ca, CN=<campaign>, basicConstraints critical CA:TRUE pathlen:0,
// keyUsage critical keyCertSign+cRLSign, subjectKeyIdentifier. Refuses
// (ALREADY_EXISTS) if either file exists. `campaign` follows ValidateName.
absl::Status InitCampaignCa(const std::string& dir, const std::string& campaign,
                            int valid_days);

struct IssuedFiles {
  std::string cert;  // Path of the PEM certificate.
  std::string key;   // Path of the PEM private key (0600).
};

// Issues a certificate for `id`, signed by the CA in DIR: Subject O=gputravel,
// OU=<role>, CN=<name>; SAN DNS:<name>.<role>.gputravel and
// URI:gputravel://<role>/<name>; basicConstraints critical CA:FALSE; keyUsage
// critical digitalSignature; extendedKeyUsage serverAuth+clientAuth; subject
// and authority key identifiers; random 128-bit serial. Refuses
// (ALREADY_EXISTS) to overwrite, and refuses a validity that outlasts the CA.
absl::StatusOr<IssuedFiles> IssueIdentity(const std::string& dir, const Identity& id,
                                          int valid_days);

// What `gputravel pki show` prints.
struct CertificateInfo {
  bool is_ca = false;
  Identity identity;    // Empty for a CA certificate.
  std::string subject;  // One line, RFC 2253 order, e.g. "CN=a,OU=holder,O=gputravel".
  std::string issuer;   // Same form.
  std::string serial;   // Lowercase hex.
  std::string not_before;  // "2025-01-31T12:00:00Z".
  std::string not_after;
};
// Describes a PEM or DER certificate. A leaf that does not encode a valid
// GPU Travelling identity is an error (naming the problem).
absl::StatusOr<CertificateInfo> DescribeCertificate(absl::string_view pem_or_der);

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_PKI_H_
