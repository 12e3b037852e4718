#include "auth/x509_util.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gputravel {
namespace {

std::string BioToString(BIO* bio) {
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  return n > 0 ? std::string(p, static_cast<size_t>(n)) : std::string();
}

std::string TimeString(const ASN1_TIME* t) {
  struct tm tm = {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return "?";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string NameLine(X509_NAME* name) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "?";
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  std::string out = BioToString(bio);
  BIO_free(bio);
  return out;
}

}  // namespace

void X509Deleter::operator()(X509* x) const { X509_free(x); }
void PkeyDeleter::operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }

X509Ptr ParseCertificate(absl::string_view text) {
  if (absl::StrContains(text, "-----BEGIN")) {
    BIO* bio = BIO_new_mem_buf(text.data(), static_cast<int>(text.size()));
    X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
    BIO_free(bio);
    return cert;
  }
  const unsigned char* p = reinterpret_cast<const unsigned char*>(text.data());
  X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(text.size())));
  // Trailing garbage after the DER structure is not a certificate.
  if (cert && p != reinterpret_cast<const unsigned char*>(text.data()) + text.size()) {
    return nullptr;
  }
  return cert;
}

int CountPemCertificates(absl::string_view text) {
  const absl::string_view kBegin = "-----BEGIN ";
  const absl::string_view kDashes = "-----";
  int n = 0;
  size_t pos = 0;
  while ((pos = text.find(kBegin, pos)) != absl::string_view::npos) {
    pos += kBegin.size();
    size_t end = text.find(kDashes, pos);
    if (end == absl::string_view::npos) break;
    if (absl::EndsWith(text.substr(pos, end - pos), "CERTIFICATE")) ++n;
    pos = end + kDashes.size();
  }
  return n;
}

PkeyPtr ParsePrivateKey(absl::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return key;
}

std::string CertificateToPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "";
  std::string out = PEM_write_bio_X509(bio, cert) == 1 ? BioToString(bio) : std::string();
  BIO_free(bio);
  return out;
}

bool KeyMatchesCertificate(EVP_PKEY* key, X509* cert) {
  EVP_PKEY* pub = X509_get0_pubkey(cert);
  return pub != nullptr && key != nullptr && EVP_PKEY_eq(key, pub) == 1;
}

absl::Status VerifyChainsTo(X509* cert, X509* ca) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  if (store == nullptr || ctx == nullptr) {
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return absl::InternalError("OpenSSL: out of memory");
  }
  if (X509_STORE_add_cert(store, ca) != 1) {
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return absl::InternalError("OpenSSL: cannot add the CA certificate to the trust store");
  }
  if (X509_STORE_CTX_init(ctx, store, cert, nullptr) != 1) {
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return absl::InternalError("OpenSSL: cannot initialise certificate verification");
  }
  int ok = X509_verify_cert(ctx);
  int err = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  if (ok == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(X509_verify_cert_error_string(err));
}

std::string NotBefore(X509* cert) { return TimeString(X509_get0_notBefore(cert)); }
std::string NotAfter(X509* cert) { return TimeString(X509_get0_notAfter(cert)); }

long long SecondsUntilNotAfter(X509* cert) {
  int days = 0, secs = 0;
  if (ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(cert)) != 1) return 0;
  return static_cast<long long>(days) * 86400 + secs;
}

std::string SubjectLine(X509* cert) { return NameLine(X509_get_subject_name(cert)); }
std::string IssuerLine(X509* cert) { return NameLine(X509_get_issuer_name(cert)); }

}  // namespace gputravel
