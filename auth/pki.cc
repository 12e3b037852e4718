#include "auth/pki.h"

#include <errno.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <openssl/pem.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

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


// The campaign CA: its certificate and its private key.
struct CampaignCa {
  X509Ptr cert;
  EcKey key;
};

absl::StatusOr<CampaignCa> LoadCa(const std::string& dir) {
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
                     "); signing needs ", CaKeyPath(dir)));
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
  return CampaignCa{std::move(ca), *std::move(ca_key)};
}

absl::Status CheckValidityWithinCa(const std::string& dir, X509* ca, int valid_days) {
  long long ca_left = SecondsUntilNotAfter(ca);
  if (ca_left <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the campaign CA in ", dir, " expired at ", NotAfter(ca)));
  }
  if (86400LL * valid_days > ca_left) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a validity of ", valid_days, " days outlasts the campaign CA (valid until ",
        NotAfter(ca), "); choose at most ", ca_left / 86400, " days"));
  }
  return absl::OkStatus();
}

// The certificate of `id` for `subject_key`, signed by the CA: the one policy
// for every identity, whether the key was made here or came in a request.
absl::StatusOr<X509Ptr> BuildIdentityCertificate(const CampaignCa& ca, const Identity& id,
                                                 EVP_PKEY* subject_key, int valid_days) {
  X509Ptr cert(X509_new());
  if (!cert) return absl::InternalError("OpenSSL: out of memory");
  absl::Status s;
  if (!(s = InitCertificate(cert.get(), subject_key, valid_days)).ok()) return s;
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!(s = AddName(name, "O", kOrganization)).ok()) return s;
  if (!(s = AddName(name, "OU", id.role)).ok()) return s;
  if (!(s = AddName(name, "CN", id.name)).ok()) return s;
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.cert.get())) != 1) {
    return absl::InternalError("OpenSSL: cannot set issuer name");
  }
  X509* issuer = ca.cert.get();
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
  if (!(s = Sign(cert.get(), ca.key)).ok()) return s;
  return cert;
}

// Keeps a copy of every certificate the CA signs, by serial, so that
// `pki revoke` finds them all (a re-issued identity has several).
absl::Status RecordIssued(const std::string& dir, X509* cert) {
  const std::string issued = IssuedDir(dir);
  if (::mkdir(issued.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create directory ", issued, ": ", std::strerror(errno)));
  }
  absl::Status s = RefuseSharedDirectory(issued);
  if (!s.ok()) return s;
  return WriteNewFile(absl::StrCat(issued, "/", SerialHex(X509_get0_serialNumber(cert)), ".pem"),
                      CertificateToPem(cert), 0644);
}

// One field of a name ("" if absent or repeated).
std::string NameField(X509_NAME* name, int nid) {
  int i = X509_NAME_get_index_by_NID(name, nid, -1);
  if (i < 0 || X509_NAME_get_index_by_NID(name, nid, i) >= 0) return "";
  ASN1_STRING* v = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
  unsigned char* utf8 = nullptr;
  int n = ASN1_STRING_to_UTF8(&utf8, v);
  if (n < 0) return "";
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

// The certificates the CA signed that are found in `files`, one per serial,
// with the identity each names; `id` (if set) keeps only that identity's.
std::vector<std::pair<X509Ptr, Identity>> SignedAmong(const std::vector<std::string>& files,
                                                      const CampaignCa& ca,
                                                      const Identity* id) {
  std::vector<std::pair<X509Ptr, Identity>> out;
  std::set<std::string> serials;
  EVP_PKEY* ca_pub = X509_get0_pubkey(ca.cert.get());
  for (const std::string& f : files) {
    absl::StatusOr<std::string> text = ReadFile(f);
    if (!text.ok()) continue;  // DIR/<role>-<name>.pem may not exist
    X509Ptr cert = ParseCertificate(*text);
    if (!cert || X509_verify(cert.get(), ca_pub) != 1) continue;  // not this CA's
    absl::StatusOr<Identity> got = IdentityFromCertificate(*text);
    if (!got.ok() || (id != nullptr && *got != *id)) continue;
    if (!serials.insert(SerialHex(X509_get0_serialNumber(cert.get()))).second) continue;
    out.emplace_back(std::move(cert), *got);
  }
  return out;
}

// DIR/issued/*.pem.
std::vector<std::string> IssuedCopies(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = ::opendir(IssuedDir(dir).c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".pem") == 0 && n[0] != '.') {
        files.push_back(IssuedDir(dir) + "/" + n);
      }
    }
    ::closedir(d);
  }
  return files;
}

// Every certificate of `id` the CA signed: DIR/issued/*.pem and
// DIR/<role>-<name>.pem (issued before the CA kept copies), by serial.
absl::StatusOr<std::vector<X509Ptr>> IssuedTo(const std::string& dir, const CampaignCa& ca,
                                              const Identity& id) {
  std::vector<std::string> files = {IdentityCertPath(dir, id)};
  for (std::string& f : IssuedCopies(dir)) files.push_back(std::move(f));
  std::vector<X509Ptr> out;
  for (auto& [cert, who] : SignedAmong(files, ca, &id)) out.push_back(std::move(cert));
  return out;
}

// Publishes DIR/crl.pem: the CRL in force (if any, and the CA's) plus
// `revoke`, number one higher, valid `crl_days`.
absl::StatusOr<CrlInfo> PublishCrl(const std::string& dir, const CampaignCa& ca,
                                   const std::vector<X509Ptr>& revoke, int crl_days) {
  absl::Status s = CheckDays(crl_days);
  if (!s.ok()) return s;
  const std::string path = CrlPath(dir);
  CrlPtr old;
  long number = 0;
  if (absl::StatusOr<std::string> text = ReadFile(path); text.ok()) {
    old = ParseCrlPem(*text);
    if (!old || X509_CRL_verify(old.get(), X509_get0_pubkey(ca.cert.get())) != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is not a CRL signed by the campaign CA of ", dir,
          "; move it away to start a new one (every revocation it held is then lost)"));
    }
    number = CrlNumber(old.get());
  }
  CrlPtr crl(X509_CRL_new());
  if (!crl) return absl::InternalError("OpenSSL: out of memory");
  CrlInfo info;
  info.number = number + 1;
  std::set<std::string> on_list;
  ASN1_TIME* now = ASN1_TIME_new();
  ASN1_TIME* next = ASN1_TIME_new();
  bool ok = now != nullptr && next != nullptr && X509_CRL_set_version(crl.get(), 1) == 1 &&
            X509_CRL_set_issuer_name(crl.get(), X509_get_subject_name(ca.cert.get())) == 1 &&
            X509_gmtime_adj(now, 0) != nullptr &&
            X509_gmtime_adj(next, 86400L * crl_days) != nullptr &&
            X509_CRL_set1_lastUpdate(crl.get(), now) == 1 &&
            X509_CRL_set1_nextUpdate(crl.get(), next) == 1;
  if (ok && old) {
    STACK_OF(X509_REVOKED)* entries = X509_CRL_get_REVOKED(old.get());
    for (int i = 0; ok && i < sk_X509_REVOKED_num(entries); ++i) {
      X509_REVOKED* r = X509_REVOKED_dup(sk_X509_REVOKED_value(entries, i));
      ok = r != nullptr && X509_CRL_add0_revoked(crl.get(), r) == 1;
      if (!ok) {
        X509_REVOKED_free(r);
        break;
      }
      on_list.insert(SerialHex(X509_REVOKED_get0_serialNumber(r)));
    }
  }
  for (size_t i = 0; ok && i < revoke.size(); ++i) {
    const ASN1_INTEGER* serial = X509_get0_serialNumber(revoke[i].get());
    const std::string hex = SerialHex(serial);
    if (!on_list.insert(hex).second) continue;
    X509_REVOKED* r = X509_REVOKED_new();
    ok = r != nullptr && X509_REVOKED_set_serialNumber(r, const_cast<ASN1_INTEGER*>(serial)) == 1 &&
         X509_REVOKED_set_revocationDate(r, now) == 1 && X509_CRL_add0_revoked(crl.get(), r) == 1;
    if (!ok) X509_REVOKED_free(r);
    info.added.push_back(hex);
  }
  ASN1_INTEGER* crl_number = ASN1_INTEGER_new();
  ok = ok && crl_number != nullptr && ASN1_INTEGER_set(crl_number, info.number) == 1 &&
       X509_CRL_add1_ext_i2d(crl.get(), NID_crl_number, crl_number, 0, 0) == 1;
  ASN1_INTEGER_free(crl_number);
  info.next_update = Asn1TimeString(next);
  ASN1_TIME_free(now);
  ASN1_TIME_free(next);
  if (!ok || X509_CRL_sort(crl.get()) != 1 ||
      X509_CRL_sign(crl.get(), ca.key.pkey(),
                    ca.key.curve() == Curve::kP384 ? EVP_sha384() : EVP_sha256()) <= 0) {
    return absl::InternalError("OpenSSL: cannot build and sign the CRL");
  }
  info.revoked = on_list.size();
  const std::string pem = CrlToPem(crl.get());
  if (pem.empty()) return absl::InternalError("OpenSSL: cannot encode the CRL");
  // A new file renamed over the old one: a daemon reading it sees the old CRL
  // or the new one, never half of one.
  const std::string staging = path + ".new";
  ::unlink(staging.c_str());
  if (!(s = WriteNewFile(staging, pem, 0644)).ok()) return s;
  if (::rename(staging.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(staging.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot replace ", path, ": ", std::strerror(err)));
  }
  return info;
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
std::string IdentityRequestPath(const std::string& dir, const Identity& id) {
  return absl::StrCat(dir, "/", id.role, "-", id.name, ".csr");
}
std::string CrlPath(const std::string& dir) { return dir + "/crl.pem"; }
std::string IssuedDir(const std::string& dir) { return dir + "/issued"; }

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
  if (!(s = RefuseOverwrite(CrlPath(dir), hint)).ok()) return s;
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
  if (!(s = WriteKeyAndCert(CaKeyPath(dir), *key, CaCertPath(dir), cert.get(), hint)).ok()) {
    return s;
  }
  // The first CRL, empty: daemons can name it from the start.
  CampaignCa ca{std::move(cert), *std::move(key)};
  return PublishCrl(dir, ca, {}, kDefaultCrlDays).status();
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
  absl::StatusOr<CampaignCa> ca = LoadCa(dir);
  if (!ca.ok()) return ca.status();
  if (!(s = CheckValidityWithinCa(dir, ca->cert.get(), valid_days)).ok()) return s;

  absl::StatusOr<EcKey> key = EcKey::Generate(Curve::kP384);
  if (!key.ok()) return key.status();
  absl::StatusOr<X509Ptr> cert = BuildIdentityCertificate(*ca, id, key->pkey(), valid_days);
  if (!cert.ok()) return cert.status();
  if (!(s = WriteKeyAndCert(out.key, *key, out.cert, cert->get(), hint)).ok()) return s;
  if (!(s = RecordIssued(dir, cert->get())).ok()) return s;
  return out;
}

absl::StatusOr<RequestFiles> CreateRequest(const std::string& out_dir, const Identity& id) {
  absl::Status s = ValidateIdentity(id);
  if (!s.ok()) return s;
  RequestFiles out{IdentityKeyPath(out_dir, id), IdentityRequestPath(out_dir, id)};
  const std::string hint = "remove it first to make a new key for " + DescribeIdentity(id);
  if (!(s = RefuseOverwrite(out.key, hint)).ok()) return s;
  if (!(s = RefuseOverwrite(out.csr, hint)).ok()) return s;
  if (!(s = EnsureDirectory(out_dir)).ok()) return s;
  absl::StatusOr<EcKey> key = EcKey::Generate(Curve::kP384);
  if (!key.ok()) return key.status();
  std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)> req(X509_REQ_new(), X509_REQ_free);
  if (!req) return absl::InternalError("OpenSSL: out of memory");
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  if (X509_REQ_set_version(req.get(), 0) != 1 ||
      X509_REQ_set_pubkey(req.get(), key->pkey()) != 1) {
    return absl::InternalError("OpenSSL: cannot build the request");
  }
  if (!(s = AddName(name, "O", kOrganization)).ok()) return s;
  if (!(s = AddName(name, "OU", id.role)).ok()) return s;
  if (!(s = AddName(name, "CN", id.name)).ok()) return s;
  if (X509_REQ_sign(req.get(), key->pkey(), EVP_sha384()) <= 0) {
    return absl::InternalError("OpenSSL: cannot sign the request");
  }
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return absl::InternalError("OpenSSL: out of memory");
  std::string csr_pem;
  if (PEM_write_bio_X509_REQ(bio, req.get()) == 1) {
    char* p = nullptr;
    long n = BIO_get_mem_data(bio, &p);
    if (n > 0) csr_pem.assign(p, static_cast<size_t>(n));
  }
  BIO_free(bio);
  if (csr_pem.empty()) return absl::InternalError("OpenSSL: cannot encode the request");
  absl::StatusOr<SecretBytes> pem = key->PrivateKeyPem();
  if (!pem.ok()) return pem.status();
  std::string staging(reinterpret_cast<const char*>(pem->data()), pem->size());
  s = WriteNewFile(out.key, staging, 0600);
  if (!staging.empty()) Zeroize(&staging[0], staging.size());
  if (s.code() == absl::StatusCode::kAlreadyExists) return AlreadyExists(out.key, hint);
  if (!s.ok()) return s;
  s = WriteNewFile(out.csr, csr_pem, 0644);
  if (!s.ok()) {
    ::unlink(out.key.c_str());
    if (s.code() == absl::StatusCode::kAlreadyExists) return AlreadyExists(out.csr, hint);
    return s;
  }
  return out;
}

absl::StatusOr<std::string> SignRequest(const std::string& dir, absl::string_view csr_pem,
                                        const Identity& id, int valid_days) {
  absl::Status s = ValidateIdentity(id);
  if (!s.ok()) return s;
  if (!(s = CheckDays(valid_days)).ok()) return s;
  const std::string cert_path = IdentityCertPath(dir, id);
  const std::string hint = "remove it first to re-issue " + DescribeIdentity(id) +
                           " (and revoke the old one with `gputravel pki revoke`)";
  if (!(s = RefuseOverwrite(cert_path, hint)).ok()) return s;
  if (!(s = RefuseSharedDirectory(dir)).ok()) return s;

  BIO* bio = BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size()));
  if (bio == nullptr) return absl::InternalError("OpenSSL: out of memory");
  std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)> req(
      PEM_read_bio_X509_REQ(bio, nullptr, nullptr, nullptr), X509_REQ_free);
  BIO_free(bio);
  if (!req) {
    return absl::InvalidArgumentError(
        "not a PEM certificate signing request (make one with `gputravel pki csr`)");
  }
  EVP_PKEY* pub = X509_REQ_get_pubkey(req.get());  // a new reference
  if (pub == nullptr) return absl::InvalidArgumentError("the request carries no public key");
  absl::StatusOr<EcKey> key = EcKey::FromPkey(pub);
  if (!key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request's key is not an EC key on P-256 or P-384: ", key.status().message()));
  }
  // Proof that whoever asks holds the private key.
  if (X509_REQ_verify(req.get(), key->pkey()) != 1) {
    return absl::InvalidArgumentError(
        "the request's signature does not verify under its own key: refused");
  }
  // The request must ask for exactly the identity the CA's operator signs.
  X509_NAME* subject = X509_REQ_get_subject_name(req.get());
  const std::string asked_o = NameField(subject, NID_organizationName);
  const std::string asked_ou = NameField(subject, NID_organizationalUnitName);
  const std::string asked_cn = NameField(subject, NID_commonName);
  if (X509_NAME_entry_count(subject) != 3 || asked_o != kOrganization || asked_ou != id.role ||
      asked_cn != id.name) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the request asks for Subject ", NameLine(subject), " but you are signing ",
        DescribeIdentity(id), " (O=gputravel, OU=", id.role, ", CN=", id.name,
        "): refused; sign it as the identity it was made for, or have the TD make a request "
        "for this identity (`gputravel pki csr --role ", id.role, " --name ", id.name, "`)"));
  }

  absl::StatusOr<CampaignCa> ca = LoadCa(dir);
  if (!ca.ok()) return ca.status();
  if (!(s = CheckValidityWithinCa(dir, ca->cert.get(), valid_days)).ok()) return s;
  // A key is certified once: revocation goes by serial, so a key certified
  // again (after its certificate was revoked because the key was stolen)
  // would outlive its revocation.
  for (const auto& [cert, who] : SignedAmong(IssuedCopies(dir), *ca, nullptr)) {
    if (EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key->pkey()) == 1) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the request's key was already certified (serial ",
          SerialHex(X509_get0_serialNumber(cert.get())), ", ", DescribeIdentity(who),
          "): a key is certified once; have the TD make a fresh key and request "
          "(`gputravel pki csr`, after removing its old key and request)"));
    }
  }
  absl::StatusOr<X509Ptr> cert = BuildIdentityCertificate(*ca, id, key->pkey(), valid_days);
  if (!cert.ok()) return cert.status();
  const std::string pem = CertificateToPem(cert->get());
  if (pem.empty()) return absl::InternalError("OpenSSL: cannot encode the certificate");
  s = WriteNewFile(cert_path, pem, 0644);
  if (s.code() == absl::StatusCode::kAlreadyExists) return AlreadyExists(cert_path, hint);
  if (!s.ok()) return s;
  if (!(s = RecordIssued(dir, cert->get())).ok()) return s;
  return cert_path;
}

absl::StatusOr<CrlInfo> RevokeIdentity(const std::string& dir, const Identity& id,
                                       int crl_days) {
  absl::Status s = ValidateIdentity(id);
  if (!s.ok()) return s;
  if (!(s = RefuseSharedDirectory(dir)).ok()) return s;
  absl::StatusOr<CampaignCa> ca = LoadCa(dir);
  if (!ca.ok()) return ca.status();
  std::vector<X509Ptr> certs;
  absl::StatusOr<std::vector<X509Ptr>> issued = IssuedTo(dir, *ca, id);
  if (!issued.ok()) return issued.status();
  if (issued->empty()) {
    return absl::NotFoundError(absl::StrCat(
        "the CA in ", dir, " signed no certificate for ", DescribeIdentity(id),
        " (none in ", IssuedDir(dir), " nor ", IdentityCertPath(dir, id), ")"));
  }
  return PublishCrl(dir, *ca, *issued, crl_days);
}

absl::StatusOr<CrlInfo> RefreshCrl(const std::string& dir, int crl_days) {
  absl::Status s = RefuseSharedDirectory(dir);
  if (!s.ok()) return s;
  absl::StatusOr<CampaignCa> ca = LoadCa(dir);
  if (!ca.ok()) return ca.status();
  return PublishCrl(dir, *ca, {}, crl_days);
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
  info.serial = SerialHex(X509_get0_serialNumber(cert.get()));
  if (!info.is_ca) {
    absl::StatusOr<Identity> id = IdentityFromCertificate(pem_or_der);
    if (!id.ok()) return id.status();
    info.identity = *id;
  }
  return info;
}

}  // namespace gputravel
