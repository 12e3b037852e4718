#include "keyxfer/x509.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <ctime>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "keyxfer/random.h"

namespace gputravel {
namespace {

// Exactly one DER certificate: bytes after it are refused, so two different
// byte strings never pass as one certificate.
X509Ptr ParseDer(absl::string_view der) {
  if (der.empty()) return nullptr;
  const unsigned char* start = reinterpret_cast<const unsigned char*>(der.data());
  const unsigned char* p = start;
  X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (cert && p != start + der.size()) return nullptr;
  return cert;
}

std::string ToDer(X509* x) {
  int len = i2d_X509(x, nullptr);
  if (len <= 0) return "";
  std::string out(static_cast<size_t>(len), '\0');
  unsigned char* p = reinterpret_cast<unsigned char*>(&out[0]);
  if (i2d_X509(x, &p) != len) return "";
  return out;
}

std::string CommonName(X509_NAME* name) {
  char buf[256] = {0};
  int n = X509_NAME_get_text_by_NID(name, NID_commonName, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

absl::Status AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) {
    return absl::InternalError(std::string("OpenSSL: cannot build extension ") +
                               OBJ_nid2sn(nid) + "=" + value);
  }
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) {
    return absl::InternalError(std::string("OpenSSL: cannot add extension ") +
                               OBJ_nid2sn(nid));
  }
  return absl::OkStatus();
}

struct StoreDeleter {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxDeleter {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct BnDeleter {
  void operator()(BIGNUM* b) const { BN_free(b); }
};

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

}  // namespace

std::string NameLine(X509_NAME* name) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "?";
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  std::string out = BioToString(bio);
  BIO_free(bio);
  return out;
}

absl::StatusOr<std::string> IssueCertificate(const EcKey& subject_key,
                                             absl::string_view common_name,
                                             const EcKey& issuer_key,
                                             absl::string_view issuer_der,
                                             bool is_ca, int valid_days) {
  X509Ptr issuer;
  if (!issuer_der.empty()) {
    issuer = ParseDer(issuer_der);
    if (!issuer) return absl::InvalidArgumentError("issuer certificate is not DER X.509");
  }
  X509Ptr cert(X509_new());
  if (!cert) return absl::InternalError("OpenSSL: out of memory");
  if (X509_set_version(cert.get(), 2) != 1) {
    return absl::InternalError("OpenSSL: cannot set the certificate version");
  }
  uint8_t serial[16];
  RandomBytes(serial, sizeof(serial));
  serial[0] &= 0x7f;
  std::unique_ptr<BIGNUM, BnDeleter> bn(BN_bin2bn(serial, sizeof(serial), nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return absl::InternalError("OpenSSL: cannot set the serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * valid_days) == nullptr) {
    return absl::InternalError("OpenSSL: cannot set the validity period");
  }
  if (X509_set_pubkey(cert.get(), subject_key.pkey()) != 1) {
    return absl::InternalError("OpenSSL: cannot set the public key");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  std::string cn(common_name);
  if (name == nullptr ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()),
                                 -1, -1, 0) != 1) {
    return absl::InternalError("OpenSSL: cannot set the subject CN");
  }
  if (X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer.get())
                                              : name) != 1) {
    return absl::InternalError("OpenSSL: cannot set the issuer name");
  }
  X509* iss = issuer ? issuer.get() : cert.get();
  // Every extension must be present: a leaf without CA:FALSE must never leave.
  absl::Status s = AddExt(cert.get(), iss, NID_basic_constraints,
                          is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  if (s.ok()) {
    s = AddExt(cert.get(), iss, NID_key_usage,
               is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  }
  if (s.ok()) s = AddExt(cert.get(), iss, NID_subject_key_identifier, "hash");
  if (!s.ok()) return s;
  const EVP_MD* md = EVP_PKEY_get_bits(issuer_key.pkey()) > 256 ? EVP_sha384()
                                                                 : EVP_sha256();
  if (X509_sign(cert.get(), issuer_key.pkey(), md) <= 0) {
    return absl::InternalError("OpenSSL: certificate signing failed");
  }
  std::string der = ToDer(cert.get());
  if (der.empty()) return absl::InternalError("OpenSSL: cannot encode the certificate");
  return der;
}

absl::StatusOr<VerifiedCertificate> VerifyCertificate(absl::string_view cert_der,
                                                      absl::string_view ca_der) {
  X509Ptr cert = ParseDer(cert_der);
  if (!cert) return absl::InvalidArgumentError("certificate is not DER X.509");
  X509Ptr ca = ParseDer(ca_der);
  if (!ca) return absl::InvalidArgumentError("CA certificate is not DER X.509");
  std::unique_ptr<X509_STORE, StoreDeleter> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, StoreCtxDeleter> ctx(X509_STORE_CTX_new());
  if (!store || !ctx) return absl::InternalError("OpenSSL: out of memory");
  if (X509_STORE_add_cert(store.get(), ca.get()) != 1) {
    return absl::InternalError("OpenSSL: cannot add the CA certificate to the trust store");
  }
  if (X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    return absl::InternalError("OpenSSL: cannot initialise certificate verification");
  }
  int ok = X509_verify_cert(ctx.get());
  int err = X509_STORE_CTX_get_error(ctx.get());
  ctx.reset();
  store.reset();
  if (ok != 1) {
    return absl::UnauthenticatedError(
        std::string("certificate does not chain to the pinned CA: ") +
        X509_verify_cert_error_string(err));
  }
  // The certified key signs (key exchanges, evidence): a CA certificate, or
  // one whose key usage does not include digitalSignature, is not an
  // identity, whatever it chains to.
  if (X509_check_ca(cert.get()) != 0) {
    return absl::UnauthenticatedError(
        "certificate is a CA certificate, not an identity (basicConstraints CA:TRUE or "
        "keyCertSign)");
  }
  if ((X509_get_extension_flags(cert.get()) & EXFLAG_KUSAGE) == 0 ||
      (X509_get_key_usage(cert.get()) & KU_DIGITAL_SIGNATURE) == 0) {
    return absl::UnauthenticatedError(
        "certificate's keyUsage does not include digitalSignature: its key may not sign");
  }
  EVP_PKEY* pub = X509_get_pubkey(cert.get());  // A new reference, owned by the key.
  if (pub == nullptr) return absl::InvalidArgumentError("certificate has no usable public key");
  auto key = EcKey::FromPkey(pub);
  if (!key.ok()) return key.status();
  return VerifiedCertificate{std::move(*key),
                             CommonName(X509_get_subject_name(cert.get()))};
}

absl::StatusOr<std::string> CertificatePemToDer(absl::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::InternalError("OpenSSL: out of memory");
  X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  if (!cert) return absl::InvalidArgumentError("not a PEM certificate");
  std::string der = ToDer(cert.get());
  if (der.empty()) return absl::InternalError("OpenSSL: cannot encode the certificate");
  return der;
}

absl::StatusOr<std::string> CertificateDerToPem(absl::string_view der) {
  X509Ptr cert = ParseDer(der);
  if (!cert) return absl::InvalidArgumentError("certificate is not DER X.509");
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return absl::InternalError("OpenSSL: out of memory");
  if (PEM_write_bio_X509(bio, cert.get()) != 1) {
    BIO_free(bio);
    return absl::InternalError("OpenSSL: cannot encode the certificate as PEM");
  }
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  std::string out = n > 0 && p != nullptr ? std::string(p, static_cast<size_t>(n)) : "";
  BIO_free(bio);
  if (out.empty()) return absl::InternalError("OpenSSL: cannot encode the certificate as PEM");
  return out;
}

void X509Deleter::operator()(X509* x) const { X509_free(x); }
void PkeyDeleter::operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }

X509Ptr ParseCertificate(absl::string_view text) {
  if (absl::StrContains(text, "-----BEGIN")) {
    BIO* bio = BIO_new_mem_buf(text.data(), static_cast<int>(text.size()));
    X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
    BIO_free(bio);
    return cert;
  }
  return ParseDer(text);
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

std::string CertificateCommonName(X509* cert) {
  return cert == nullptr ? std::string() : CommonName(X509_get_subject_name(cert));
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

std::string Asn1TimeString(const ASN1_TIME* t) { return TimeString(t); }

void CrlDeleter::operator()(X509_CRL* c) const { X509_CRL_free(c); }

CrlPtr ParseCrlPem(absl::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return nullptr;
  CrlPtr crl(PEM_read_bio_X509_CRL(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return crl;
}

std::string CrlToPem(X509_CRL* crl) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "";
  std::string out = PEM_write_bio_X509_CRL(bio, crl) == 1 ? BioToString(bio) : "";
  BIO_free(bio);
  return out;
}

long CrlNumber(X509_CRL* crl) {
  ASN1_INTEGER* n =
      static_cast<ASN1_INTEGER*>(X509_CRL_get_ext_d2i(crl, NID_crl_number, nullptr, nullptr));
  if (n == nullptr) return 0;
  long v = ASN1_INTEGER_get(n);
  ASN1_INTEGER_free(n);
  return v < 0 ? 0 : v;
}

std::string SerialHex(const ASN1_INTEGER* serial) {
  std::string out;
  BIGNUM* bn = ASN1_INTEGER_to_BN(serial, nullptr);
  if (bn == nullptr) return out;
  char* hex = BN_bn2hex(bn);
  if (hex != nullptr) out = hex;
  OPENSSL_free(hex);
  BN_free(bn);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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
