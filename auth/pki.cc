#include "auth/pki.h"

#include <errno.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/random.h"
#include "keyxfer/secret_bytes.h"
#include "keyxfer/x509.h"
#include "util/files.h"

namespace gputravel {
namespace {

constexpr char kOrganization[] = "gputravel";
constexpr char kCaUnit[] = "campaign-ca";
// Tolerated clock skew between the machines of a campaign.
constexpr long kBackdateSeconds = 3600;

absl::Status CheckDays(int valid_days) {
  if (valid_days < kMinValidDays || valid_days > kMaxValidDays) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid validity ", valid_days, " days: must be ", kMinValidDays, "..",
        kMaxValidDays));
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

absl::Status AlreadyExists(const std::string& path, const std::string& hint) {
  return absl::AlreadyExistsError(
      absl::StrCat(path, " already exists; refusing to overwrite it (", hint, ")"));
}

// An early, friendly check; WriteNewFile refuses an existing path (a symbolic
// link included) again at open time, so nothing that appears in between is
// ever followed or overwritten.
absl::Status RefuseOverwrite(const std::string& path, const std::string& hint) {
  if (Exists(path)) return AlreadyExists(path, hint);
  return absl::OkStatus();
}

// The PKI directory holds private keys: whoever else may create, rename or
// remove entries in it could swap a certificate or plant a link. A directory
// that does not exist (yet) passes; its creator makes it 0700.
absl::Status RefuseSharedDirectory(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(dir + " exists and is not a directory");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return absl::FailedPreconditionError(absl::StrCat(
        "the PKI directory ", dir, " is writable by ",
        (st.st_mode & S_IWOTH) != 0 ? "other users" : "its group", " (mode ", mode,
        "); it holds private keys, so only its owner may write to it: run `chmod go-w ",
        dir, "` or use a new directory"));
  }
  return absl::OkStatus();
}

absl::Status EnsureDirectory(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("PKI directory is empty");
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return RefuseSharedDirectory(dir);
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create directory ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status AddName(X509_NAME* name, const char* field, const std::string& value) {
  if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(value.c_str()),
                                 -1, -1, 0) != 1) {
    return absl::InternalError(absl::StrCat("OpenSSL: cannot set subject ", field));
  }
  return absl::OkStatus();
}

absl::Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) {
    return absl::InternalError(
        absl::StrCat("OpenSSL: cannot build extension ", OBJ_nid2sn(nid), "=", value));
  }
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) {
    return absl::InternalError(absl::StrCat("OpenSSL: cannot add extension ",
                                            OBJ_nid2sn(nid)));
  }
  return absl::OkStatus();
}

// Version 3, random positive 128-bit serial, validity, public key.
absl::Status InitCertificate(X509* cert, EVP_PKEY* subject_key, int valid_days) {
  if (X509_set_version(cert, 2) != 1) return absl::InternalError("OpenSSL: X509_set_version");
  uint8_t serial[16];
  do {
    RandomBytes(serial, sizeof(serial));
  } while (serial[0] == 0);  // Keep the serial a full 128 bits (and non-zero).
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  bool ok = bn != nullptr &&
            BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != nullptr;
  BN_free(bn);
  if (!ok) return absl::InternalError("OpenSSL: cannot set serial number");
  if (X509_gmtime_adj(X509_getm_notBefore(cert), -kBackdateSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert), 86400L * valid_days) == nullptr) {
    return absl::InternalError("OpenSSL: cannot set validity");
  }
  if (X509_set_pubkey(cert, subject_key) != 1) {
    return absl::InternalError("OpenSSL: cannot set public key");
  }
  return absl::OkStatus();
}

absl::Status Sign(X509* cert, const EcKey& key) {
  const EVP_MD* md = key.curve() == Curve::kP384 ? EVP_sha384() : EVP_sha256();
  if (X509_sign(cert, key.pkey(), md) <= 0) {
    return absl::InternalError("OpenSSL: certificate signing failed");
  }
  return absl::OkStatus();
}

// Writes the key (0600) then the certificate, each created exclusively (an
// existing file or symbolic link is refused, never followed); removes the key
// if the certificate cannot be written so no half-issued identity is left
// behind.
absl::Status WriteKeyAndCert(const std::string& key_path, const EcKey& key,
                             const std::string& cert_path, X509* cert,
                             const std::string& hint) {
  const std::string cert_pem = CertificateToPem(cert);
  if (cert_pem.empty()) return absl::InternalError("OpenSSL: cannot encode the certificate");
  absl::StatusOr<SecretBytes> pem = key.PrivateKeyPem();
  if (!pem.ok()) return pem.status();
  std::string staging(reinterpret_cast<const char*>(pem->data()), pem->size());
  absl::Status ws = WriteNewFile(key_path, staging, 0600);
  if (!staging.empty()) Zeroize(&staging[0], staging.size());
  if (ws.code() == absl::StatusCode::kAlreadyExists) return AlreadyExists(key_path, hint);
  if (!ws.ok()) return ws;
  ws = WriteNewFile(cert_path, cert_pem, 0644);
  if (!ws.ok()) {
    ::unlink(key_path.c_str());
    if (ws.code() == absl::StatusCode::kAlreadyExists) return AlreadyExists(cert_path, hint);
    return ws;
  }
  return absl::OkStatus();
}

}  // namespace

std::string CaCertPath(const std::string& dir) { return dir + "/ca.pem"; }
std::string CaKeyPath(const std::string& dir) { return dir + "/ca.key"; }
std::string IdentityCertPath(const std::string& dir, const Identity& id) {
  return absl::StrCat(dir, "/", id.role, "-", id.name, ".pem");
}
std::string IdentityKeyPath(const std::string& dir, const Identity& id) {
  return absl::StrCat(dir, "/", id.role, "-", id.name, ".key");
}

absl::Status InitCampaignCa(const std::string& dir, const std::string& campaign,
                            int valid_days) {
  absl::Status s = ValidateName(campaign);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("campaign: ", s.message()));
  }
  if (!(s = CheckDays(valid_days)).ok()) return s;
  const std::string hint =
      "a campaign has one CA; remove " + dir + "/ca.pem and ca.key to start over, "
      "which invalidates every certificate issued from it";
  if (!(s = RefuseOverwrite(CaCertPath(dir), hint)).ok()) return s;
  if (!(s = RefuseOverwrite(CaKeyPath(dir), hint)).ok()) return s;
  if (!(s = EnsureDirectory(dir)).ok()) return s;

  absl::StatusOr<EcKey> key = EcKey::Generate(Curve::kP384);
  if (!key.ok()) return key.status();
  X509Ptr cert(X509_new());
  if (!cert) return absl::InternalError("OpenSSL: out of memory");
  if (!(s = InitCertificate(cert.get(), key->pkey(), valid_days)).ok()) return s;
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!(s = AddName(name, "O", kOrganization)).ok()) return s;
  if (!(s = AddName(name, "OU", kCaUnit)).ok()) return s;
  if (!(s = AddName(name, "CN", campaign)).ok()) return s;
  if (X509_set_issuer_name(cert.get(), name) != 1) {
    return absl::InternalError("OpenSSL: cannot set issuer name");
  }
  if (!(s = AddExt(cert.get(), cert.get(), NID_basic_constraints,
                   "critical,CA:TRUE,pathlen:0")).ok() ||
      !(s = AddExt(cert.get(), cert.get(), NID_key_usage,
                   "critical,keyCertSign,cRLSign")).ok() ||
      !(s = AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash")).ok()) {
    return s;
  }
  if (!(s = Sign(cert.get(), *key)).ok()) return s;
  return WriteKeyAndCert(CaKeyPath(dir), *key, CaCertPath(dir), cert.get(), hint);
}

absl::StatusOr<IssuedFiles> IssueIdentity(const std::string& dir, const Identity& id,
                                          int valid_days) {
  absl::Status s = ValidateIdentity(id);
  if (!s.ok()) return s;
  if (!(s = CheckDays(valid_days)).ok()) return s;
  IssuedFiles out{IdentityCertPath(dir, id), IdentityKeyPath(dir, id)};
  const std::string hint = "remove it first to re-issue " + DescribeIdentity(id);
  if (!(s = RefuseOverwrite(out.cert, hint)).ok()) return s;
  if (!(s = RefuseOverwrite(out.key, hint)).ok()) return s;
  if (!(s = RefuseSharedDirectory(dir)).ok()) return s;

  // The campaign CA.
  const std::string init_hint =
      "; create the campaign CA first with `gputravel pki init --dir " + dir +
      " --campaign NAME`";
  absl::StatusOr<std::string> ca_pem = ReadFile(CaCertPath(dir));
  if (!ca_pem.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no campaign CA in ", dir, " (", ca_pem.status().message(), ")",
                     init_hint));
  }
  X509Ptr ca = ParseCertificate(*ca_pem);
  if (!ca) {
    return absl::FailedPreconditionError(CaCertPath(dir) + " is not a PEM certificate");
  }
  absl::StatusOr<std::string> ca_key_pem = ReadFile(CaKeyPath(dir));
  if (!ca_key_pem.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the campaign CA key (", ca_key_pem.status().message(),
                     "); issuing needs ", CaKeyPath(dir)));
  }
  absl::StatusOr<EcKey> ca_key = EcKey::FromPrivatePem(*ca_key_pem);
  Zeroize(&(*ca_key_pem)[0], ca_key_pem->size());
  if (!ca_key.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        CaKeyPath(dir), " is not a usable EC private key: ", ca_key.status().message()));
  }
  if (!KeyMatchesCertificate(ca_key->pkey(), ca.get())) {
    return absl::FailedPreconditionError(
        CaKeyPath(dir) + " is not the private key of " + CaCertPath(dir));
  }
  long long ca_left = SecondsUntilNotAfter(ca.get());
  if (ca_left <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the campaign CA in ", dir, " expired at ", NotAfter(ca.get())));
  }
  if (86400LL * valid_days > ca_left) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a validity of ", valid_days, " days outlasts the campaign CA (valid until ",
        NotAfter(ca.get()), "); choose at most ", ca_left / 86400, " days"));
  }

  absl::StatusOr<EcKey> key = EcKey::Generate(Curve::kP384);
  if (!key.ok()) return key.status();
  X509Ptr cert(X509_new());
  if (!cert) return absl::InternalError("OpenSSL: out of memory");
  if (!(s = InitCertificate(cert.get(), key->pkey(), valid_days)).ok()) return s;
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!(s = AddName(name, "O", kOrganization)).ok()) return s;
  if (!(s = AddName(name, "OU", id.role)).ok()) return s;
  if (!(s = AddName(name, "CN", id.name)).ok()) return s;
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get())) != 1) {
    return absl::InternalError("OpenSSL: cannot set issuer name");
  }
  X509* issuer = ca.get();
  if (!(s = AddExt(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE")).ok() ||
      !(s = AddExt(cert.get(), issuer, NID_key_usage, "critical,digitalSignature")).ok() ||
      !(s = AddExt(cert.get(), issuer, NID_ext_key_usage, "serverAuth,clientAuth")).ok() ||
      !(s = AddExt(cert.get(), issuer, NID_subject_alt_name,
                   absl::StrCat("DNS:", ServerNameFor(id), ",URI:", IdentityUri(id))))
           .ok() ||
      !(s = AddExt(cert.get(), issuer, NID_subject_key_identifier, "hash")).ok() ||
      !(s = AddExt(cert.get(), issuer, NID_authority_key_identifier, "keyid:always"))
           .ok()) {
    return s;
  }
  if (!(s = Sign(cert.get(), *ca_key)).ok()) return s;
  if (!(s = WriteKeyAndCert(out.key, *key, out.cert, cert.get(), hint)).ok()) return s;
  return out;
}

absl::StatusOr<CertificateInfo> DescribeCertificate(absl::string_view pem_or_der) {
  X509Ptr cert = ParseCertificate(pem_or_der);
  if (!cert) return absl::InvalidArgumentError("not a PEM or DER X.509 certificate");
  CertificateInfo info;
  info.is_ca = X509_check_ca(cert.get()) != 0;
  info.subject = SubjectLine(cert.get());
  info.issuer = IssuerLine(cert.get());
  info.not_before = NotBefore(cert.get());
  info.not_after = NotAfter(cert.get());
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr);
  if (bn != nullptr) {
    char* hex = BN_bn2hex(bn);
    info.serial = hex != nullptr ? hex : "";
    for (char& c : info.serial) c = static_cast<char>(std::tolower(c));
    OPENSSL_free(hex);
    BN_free(bn);
  }
  if (!info.is_ca) {
    absl::StatusOr<Identity> id = IdentityFromCertificate(pem_or_der);
    if (!id.ok()) return id.status();
    info.identity = *id;
  }
  return info;
}

}  // namespace gputravel
