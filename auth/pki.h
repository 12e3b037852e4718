#ifndef GPUTRAVEL_AUTH_PKI_H_
#define GPUTRAVEL_AUTH_PKI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "auth/identity.h"

namespace gputravel {

// The campaign PKI behind mTLS: one CA per campaign (ECDSA P-384, SHA-384)
// and one certificate per identity, all as PEM files in one directory:
//
//   DIR/ca.pem, DIR/ca.key                   the campaign CA (key 0600)
//   DIR/<role>-<name>.pem, DIR/<role>-<name>.key   one per identity (key 0600;
//                                            no key when signed from a request)
//   DIR/issued/<serial>.pem                  every certificate the CA signed
//   DIR/crl.pem                              the CRL (X.509 v2, signed by the CA)
//
// Nothing but the CRL is ever overwritten: re-issuing means removing the
// files first. The CRL is replaced whole (a new file renamed over it).
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
std::string IdentityRequestPath(const std::string& dir, const Identity& id);  // <role>-<name>.csr
std::string CrlPath(const std::string& dir);
std::string IssuedDir(const std::string& dir);

// Validity of a published CRL (its nextUpdate), by default.
inline constexpr int kDefaultCrlDays = 30;

// Creates DIR (mode 0700) if it does not exist, and writes DIR/ca.pem and
// DIR/ca.key (0600): a self-signed X.509 v3 CA, Subject O=gputravel,
// OU=campaign-ca, CN=<campaign>, basicConstraints critical CA:TRUE pathlen:0,
// keyUsage critical keyCertSign+cRLSign, subjectKeyIdentifier, and the first
// CRL DIR/crl.pem (empty, number 1, valid kDefaultCrlDays). Refuses
// (ALREADY_EXISTS) if any of the files exists. `campaign` follows ValidateName.
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

// Where a key is born: makes a key pair (ECDSA P-384) and a certificate
// signing request for `id` (Subject O=gputravel, OU=<role>, CN=<name>, signed
// with the new key) in OUT_DIR: OUT_DIR/<role>-<name>.key (0600; it never
// needs to leave this machine) and OUT_DIR/<role>-<name>.csr. Creates OUT_DIR
// (0700) if missing; refuses a directory others may write and never
// overwrites.
struct RequestFiles {
  std::string key;
  std::string csr;
};
absl::StatusOr<RequestFiles> CreateRequest(const std::string& out_dir, const Identity& id);

// Signs the request `csr_pem` at the CA in DIR as `id`, the identity the CA's
// operator names: the same policy as IssueIdentity. The request must be for
// exactly `id` (Subject O=gputravel, OU=<role>, CN=<name>), signed by its own
// key (an EC key on P-256 or P-384); a request for another role or name is
// refused naming both. Nothing else of the request is taken: every
// extension it asks for (a SAN of another identity, CA:TRUE, other key
// usages) is ignored and the certificate carries exactly IssueIdentity's.
// Writes DIR/<role>-<name>.pem (never overwriting) and returns its path.
absl::StatusOr<std::string> SignRequest(const std::string& dir, absl::string_view csr_pem,
                                        const Identity& id, int valid_days);

// What a CRL publication did.
struct CrlInfo {
  long number = 0;                  // cRLNumber of the new CRL
  std::vector<std::string> added;   // serials (hex) newly revoked
  size_t revoked = 0;               // serials on the new CRL
  std::string next_update;          // "2025-01-31T12:00:00Z"
};

// Revokes every certificate the CA in DIR signed for `id` (those in
// DIR/issued/ and DIR/<role>-<name>.pem) and publishes DIR/crl.pem: the CRL
// in force plus those serials, number one higher, valid `crl_days`, signed by
// the CA. NOT_FOUND if the CA signed no certificate for `id`.
absl::StatusOr<CrlInfo> RevokeIdentity(const std::string& dir, const Identity& id,
                                       int crl_days);
// Publishes the CRL in force again with fresh dates (before its nextUpdate
// passes) and number one higher.
absl::StatusOr<CrlInfo> RefreshCrl(const std::string& dir, int crl_days);

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
