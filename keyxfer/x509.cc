#include "keyxfer/x509.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "keyxfer/random.h"

namespace gputravel {
namespace {

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;

X509Ptr ParseDer(absl::string_view der) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  return X509Ptr(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
}

std::string ToDer(X509* x) {
  int len = i2d_X509(x, nullptr);
  if (len <= 0) return "";
  std::string out(static_cast<size_t>(len), '\0');
  unsigned char* p = reinterpret_cast<unsigned char*>(&out[0]);
  i2d_X509(x, &p);
  return out;
}

std::string CommonName(X509_NAME* name) {
  char buf[256] = {0};
  int n = X509_NAME_get_text_by_NID(name, NID_commonName, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext != nullptr) {
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
}

}  // namespace

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
  X509_set_version(cert.get(), 2);
  uint8_t serial[16];
  RandomBytes(serial, sizeof(serial));
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * valid_days);
  X509_set_pubkey(cert.get(), subject_key.pkey());
  X509_NAME* name = X509_get_subject_name(cert.get());
  std::string cn(common_name);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer.get())
                                          : name);
  X509* iss = issuer ? issuer.get() : cert.get();
  AddExt(cert.get(), iss, NID_basic_constraints,
         is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  AddExt(cert.get(), iss, NID_key_usage,
         is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  AddExt(cert.get(), iss, NID_subject_key_identifier, "hash");
  const EVP_MD* md = EVP_PKEY_get_bits(issuer_key.pkey()) > 256 ? EVP_sha384()
                                                                 : EVP_sha256();
  if (X509_sign(cert.get(), issuer_key.pkey(), md) <= 0) {
    return absl::InternalError("OpenSSL: certificate signing failed");
  }
  return ToDer(cert.get());
}

absl::StatusOr<VerifiedCertificate> VerifyCertificate(absl::string_view cert_der,
                                                      absl::string_view ca_der) {
  X509Ptr cert = ParseDer(cert_der);
  if (!cert) return absl::InvalidArgumentError("certificate is not DER X.509");
  X509Ptr ca = ParseDer(ca_der);
  if (!ca) return absl::InvalidArgumentError("CA certificate is not DER X.509");
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert.get(), nullptr);
  int ok = X509_verify_cert(ctx);
  int err = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  if (ok != 1) {
    return absl::UnauthenticatedError(
        std::string("certificate does not chain to the pinned CA: ") +
        X509_verify_cert_error_string(err));
  }
  auto key = EcKey::FromPkey(X509_get_pubkey(cert.get()));
  if (!key.ok()) return key.status();
  return VerifiedCertificate{std::move(*key),
                             CommonName(X509_get_subject_name(cert.get()))};
}

absl::StatusOr<std::string> CertificatePemToDer(absl::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  if (!cert) return absl::InvalidArgumentError("not a PEM certificate");
  return ToDer(cert.get());
}

absl::StatusOr<std::string> CertificateDerToPem(absl::string_view der) {
  X509Ptr cert = ParseDer(der);
  if (!cert) return absl::InvalidArgumentError("certificate is not DER X.509");
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert.get());
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  std::string out(p, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

}  // namespace gputravel
