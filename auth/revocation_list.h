#ifndef GPUTRAVEL_AUTH_REVOCATION_LIST_H_
#define GPUTRAVEL_AUTH_REVOCATION_LIST_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "auth/identity.h"

typedef struct x509_st X509;
typedef struct X509_crl_st X509_CRL;

namespace gputravel {

// What Check's refusal of a revoked certificate says.
inline constexpr char kRevokedMark[] = " is revoked (CRL ";

// Whether a RevocationList of this process has refused a certificate of
// `id` as revoked (Check): the campaign CA's word, found by this process's
// own check. A peer's message that merely contains kRevokedMark (a holder
// agent passing on an error the host made) proves nothing and is not asked.
bool RefusedAsRevoked(const Identity& id);

// The campaign's certificate revocation list (an X.509 CRL in PEM, as
// `gputravel pki revoke` publishes it) as a daemon applies it: every TLS
// handshake, in either direction, asks Check about the peer's certificate.
//
// A CRL is used only if it is signed by the campaign CA, names it as issuer,
// and its thisUpdate is not in the future. Check rereads the file whenever it
// changed (inode, size or modification time differ from the last read), so a
// new CRL takes effect at the next handshake without a restart. A changed
// file that does not pass (unreadable, not signed by the CA, or an older CRL
// than the one in force: a lower cRLNumber) is refused and the CRL in force
// stays, so a host that deletes or rolls the file back revokes nothing less.
// Once the CRL in force is past its nextUpdate, every handshake is refused
// until a fresh one is published (`gputravel pki crl`): an old CRL could
// hide a later revocation.
class RevocationList {
 public:
  // Reads and checks `path` against the CA certificate `ca_pem`; errors name
  // the file and say what is wrong with it.
  static absl::StatusOr<std::shared_ptr<RevocationList>> Open(const std::string& path,
                                                              absl::string_view ca_pem);
  ~RevocationList();
  RevocationList(const RevocationList&) = delete;
  RevocationList& operator=(const RevocationList&) = delete;

  // OK if `cert` (the peer's leaf certificate) is not revoked by the CRL in
  // force, after rereading the file if it changed. PERMISSION_DENIED
  // "certificate <serial> of holder 'a' is revoked (CRL <path>, since <time>)"
  // for a revoked one; FAILED_PRECONDITION when the CRL in force has expired.
  absl::Status Check(X509* cert);

  const std::string& path() const { return path_; }
  // The cRLNumber of the CRL in force (0 if it has none).
  long number();

 private:
  RevocationList(std::string path, X509* ca);
  // Reads the file if its fingerprint changed; keeps the CRL in force when
  // the new file does not pass.
  void RefreshLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads and checks the file; on success replaces the CRL in force.
  absl::Status LoadLocked(const std::string& fingerprint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  X509* const ca_;  // owned
  absl::Mutex mu_;
  X509_CRL* crl_ ABSL_GUARDED_BY(mu_) = nullptr;  // owned
  long number_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fingerprint_ ABSL_GUARDED_BY(mu_);  // of the file last read
};

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_REVOCATION_LIST_H_
