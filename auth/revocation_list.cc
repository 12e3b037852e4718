#include "auth/revocation_list.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "auth/identity.h"
#include "keyxfer/x509.h"
#include "util/files.h"
#include "util/log.h"

namespace gputravel {
namespace {

// A CRL of a campaign is a few KiB per hundred revoked certificates.
constexpr off_t kMaxCrlBytes = 4 << 20;
// Tolerated clock skew for thisUpdate (as pki backdates certificates).
constexpr long kSkewSeconds = 3600;

absl::StatusOr<std::string> Fingerprint(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("CRL ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("CRL ", path, ": not a regular file"));
  }
  if (st.st_size > kMaxCrlBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("CRL ", path, ": ", st.st_size, " bytes, more than a CRL can be"));
  }
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec,
                      ".", st.st_mtim.tv_nsec);
}

// Parses and checks a CRL of `ca`.
absl::StatusOr<CrlPtr> ParseCrl(const std::string& path, const std::string& text, X509* ca) {
  CrlPtr crl = ParseCrlPem(text);
  if (!crl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CRL ", path, ": not a PEM X.509 CRL (publish one with `gputravel pki revoke` or "
        "`gputravel pki crl`)"));
  }
  if (X509_NAME_cmp(X509_CRL_get_issuer(crl.get()), X509_get_subject_name(ca)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CRL ", path, ": issued by ", "another CA than the campaign CA this daemon trusts"));
  }
  EVP_PKEY* ca_key = X509_get0_pubkey(ca);
  if (ca_key == nullptr || X509_CRL_verify(crl.get(), ca_key) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CRL ", path, ": its signature does not verify under the campaign CA"));
  }
  const ASN1_TIME* this_update = X509_CRL_get0_lastUpdate(crl.get());
  time_t limit = std::time(nullptr) + kSkewSeconds;
  // -1: before the limit; 1: after it; 0: unreadable.
  if (this_update == nullptr || X509_cmp_time(this_update, &limit) != -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CRL ", path, ": thisUpdate ", Asn1TimeString(this_update), " is in the future"));
  }
  if (X509_CRL_get0_nextUpdate(crl.get()) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("CRL ", path, ": has no nextUpdate"));
  }
  return crl;
}

}  // namespace

RevocationList::RevocationList(std::string path, X509* ca) : path_(std::move(path)), ca_(ca) {}

RevocationList::~RevocationList() {
  X509_free(ca_);
  X509_CRL_free(crl_);
}

absl::StatusOr<std::shared_ptr<RevocationList>> RevocationList::Open(const std::string& path,
                                                                     absl::string_view ca_pem) {
  X509Ptr ca = ParseCertificate(ca_pem);
  if (!ca) return absl::InvalidArgumentError("CRL " + path + ": the CA is not a certificate");
  std::shared_ptr<RevocationList> list(new RevocationList(path, ca.release()));
  absl::StatusOr<std::string> fp = Fingerprint(path);
  if (!fp.ok()) return fp.status();
  absl::MutexLock l(&list->mu_);
  absl::Status s = list->LoadLocked(*fp);
  if (!s.ok()) return s;
  return list;
}

absl::Status RevocationList::LoadLocked(const std::string& fingerprint) {
  fingerprint_ = fingerprint;
  absl::StatusOr<std::string> text = ReadFile(path_);
  if (!text.ok()) return absl::InvalidArgumentError("CRL " + std::string(text.status().message()));
  absl::StatusOr<CrlPtr> crl = ParseCrl(path_, *text, ca_);
  if (!crl.ok()) return crl.status();
  const long number = CrlNumber(crl->get());
  if (crl_ != nullptr && number < number_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CRL ", path_, ": number ", number, " is older than the CRL in force (number ",
        number_, ")"));
  }
  X509_CRL_free(crl_);
  crl_ = crl->release();
  number_ = number;
  return absl::OkStatus();
}

void RevocationList::RefreshLocked() {
  absl::StatusOr<std::string> fp = Fingerprint(path_);
  if (!fp.ok()) {
    // A vanished or odd file: keep the CRL in force; say so once per change.
    const std::string gone = "!" + std::string(fp.status().message());
    if (gone != fingerprint_) {
      fingerprint_ = gone;
      GT_LOG(0, fp.status().message(), "; the CRL read before (number ", number_,
             ") stays in force");
    }
    return;
  }
  if (*fp == fingerprint_) return;
  absl::Status s = LoadLocked(*fp);
  if (!s.ok()) {
    GT_LOG(0, s.message(), "; the CRL read before (number ", number_, ") stays in force");
  } else {
    GT_LOG(1, "CRL ", path_, ": number ", number_, " in force");
  }
}

long RevocationList::number() {
  absl::MutexLock l(&mu_);
  return number_;
}

namespace {

// The identities this process's revocation checks refused (a CRL only
// grows, so once revoked, always).
absl::Mutex& RevokedSeenMu() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}
std::set<std::string>& RevokedSeen() {
  static std::set<std::string>* seen = new std::set<std::string>();
  return *seen;
}
void NoteRevoked(const Identity& id) {
  absl::MutexLock l(&RevokedSeenMu());
  RevokedSeen().insert(DescribeIdentity(id));
}

}  // namespace

absl::Status RevocationList::Check(X509* cert) {
  absl::MutexLock l(&mu_);
  RefreshLocked();
  const ASN1_TIME* next = X509_CRL_get0_nextUpdate(crl_);
  if (next == nullptr || X509_cmp_current_time(next) <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CRL ", path_, " expired at ", Asn1TimeString(next),
        ": no connection is accepted until the campaign CA publishes a fresh one "
        "(`gputravel pki crl`) and it is copied to ", path_));
  }
  X509_REVOKED* revoked = nullptr;
  if (X509_CRL_get0_by_cert(crl_, &revoked, cert) == 1) {
    absl::StatusOr<Identity> id = IdentityFromCertificate(CertificateToPem(cert));
    if (id.ok()) NoteRevoked(*id);
    return absl::PermissionDeniedError(absl::StrCat(
        "certificate ", SerialHex(X509_get0_serialNumber(cert)), " of ",
        id.ok() ? DescribeIdentity(*id) : std::string("an unknown identity"),
        kRevokedMark, path_, ", since ",
        Asn1TimeString(X509_REVOKED_get0_revocationDate(revoked)), ")"));
  }
  return absl::OkStatus();
}

bool RefusedAsRevoked(const Identity& id) {
  absl::MutexLock l(&RevokedSeenMu());
  return RevokedSeen().count(DescribeIdentity(id)) != 0;
}

}  // namespace gputravel
