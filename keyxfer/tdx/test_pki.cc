#include "keyxfer/tdx/test_pki.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>

namespace gputravel::tdx::testing {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "test PKI: %s failed: %s\n", what,
                 DrainOpensslErrors().c_str());
    std::abort();
  }
}

void SetTime(ASN1_TIME* t, absl::Time when) {
  Check(ASN1_TIME_set(t, absl::ToTimeT(when)) != nullptr, "ASN1_TIME_set");
}

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  Check(ext != nullptr && X509_add_ext(cert, ext, -1) == 1, "X509_add_ext");
  X509_EXTENSION_free(ext);
}

}  // namespace

std::string TestCert::Pem() const {
  OsslPtr<BIO> bio(BIO_new(BIO_s_mem()));
  Check(bio && PEM_write_bio_X509(bio.get(), cert.get()) == 1, "PEM write");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

TestCert IssueTestCert(const std::string& cn, long serial, bool is_ca,
                       const TestCert* issuer, absl::Time not_before,
                       absl::Time not_after) {
  TestCert out;
  out.key.reset(EVP_EC_gen("P-256"));
  Check(out.key != nullptr, "EVP_EC_gen");
  out.cert.reset(X509_new());
  X509* c = out.cert.get();
  Check(X509_set_version(c, 2) == 1, "X509_set_version");
  Check(ASN1_INTEGER_set(X509_get_serialNumber(c), serial) == 1, "serial");
  X509_NAME* name = X509_get_subject_name(c);
  Check(X509_NAME_add_entry_by_txt(
            name, "CN", MBSTRING_ASC,
            reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
            0) == 1,
        "subject");
  X509* signer_cert = issuer ? issuer->cert.get() : c;
  EVP_PKEY* signer_key = issuer ? issuer->key.get() : out.key.get();
  Check(X509_set_issuer_name(c, X509_get_subject_name(signer_cert)) == 1,
        "issuer");
  SetTime(X509_getm_notBefore(c), not_before);
  SetTime(X509_getm_notAfter(c), not_after);
  Check(X509_set_pubkey(c, out.key.get()) == 1, "pubkey");
  AddExtension(c, signer_cert, NID_basic_constraints,
               is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  AddExtension(c, signer_cert, NID_key_usage,
               is_ca ? "critical,keyCertSign,cRLSign"
                     : "critical,digitalSignature");
  AddExtension(c, signer_cert, NID_subject_key_identifier, "hash");
  Check(X509_sign(c, signer_key, EVP_sha256()) > 0, "X509_sign");
  return out;
}

std::string IssueTestCrl(const TestCert& issuer,
                         const std::vector<long>& revoked_serials,
                         absl::Time this_update, absl::Time next_update) {
  OsslPtr<X509_CRL> crl(X509_CRL_new());
  Check(crl && X509_CRL_set_version(crl.get(), 1) == 1, "CRL version");
  Check(X509_CRL_set_issuer_name(crl.get(),
                                 X509_get_subject_name(issuer.cert.get())) == 1,
        "CRL issuer");
  ASN1_TIME* t = ASN1_TIME_new();
  SetTime(t, this_update);
  Check(X509_CRL_set1_lastUpdate(crl.get(), t) == 1, "lastUpdate");
  SetTime(t, next_update);
  Check(X509_CRL_set1_nextUpdate(crl.get(), t) == 1, "nextUpdate");
  for (long serial : revoked_serials) {
    X509_REVOKED* r = X509_REVOKED_new();
    ASN1_INTEGER* s = ASN1_INTEGER_new();
    Check(ASN1_INTEGER_set(s, serial) == 1 &&
              X509_REVOKED_set_serialNumber(r, s) == 1 &&
              X509_REVOKED_set_revocationDate(r, t) == 1 &&
              X509_CRL_add0_revoked(crl.get(), r) == 1,
          "revoked entry");
    ASN1_INTEGER_free(s);
  }
  ASN1_TIME_free(t);
  Check(X509_CRL_sort(crl.get()) == 1, "CRL sort");
  Check(X509_CRL_sign(crl.get(), issuer.key.get(), EVP_sha256()) > 0,
        "CRL sign");
  int len = i2d_X509_CRL(crl.get(), nullptr);
  std::string der(static_cast<size_t>(len), '\0');
  unsigned char* p = reinterpret_cast<unsigned char*>(der.data());
  Check(i2d_X509_CRL(crl.get(), &p) == len, "CRL encode");
  return der;
}

std::array<uint8_t, 64> SignRaw(EVP_PKEY* key, const std::string& data) {
  OsslPtr<EVP_MD_CTX> md(EVP_MD_CTX_new());
  size_t len = 0;
  Check(md && EVP_DigestSignInit_ex(md.get(), nullptr, "SHA256", nullptr,
                                    nullptr, key, nullptr) == 1,
        "sign init");
  Check(EVP_DigestSign(md.get(), nullptr, &len,
                       reinterpret_cast<const unsigned char*>(data.data()),
                       data.size()) == 1,
        "sign size");
  std::string der(len, '\0');
  Check(EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(der.data()),
                       &len,
                       reinterpret_cast<const unsigned char*>(data.data()),
                       data.size()) == 1,
        "sign");
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(len));
  Check(sig != nullptr, "decode signature");
  std::array<uint8_t, 64> out{};
  Check(BN_bn2binpad(ECDSA_SIG_get0_r(sig), out.data(), 32) == 32 &&
            BN_bn2binpad(ECDSA_SIG_get0_s(sig), out.data() + 32, 32) == 32,
        "r||s");
  ECDSA_SIG_free(sig);
  return out;
}

}  // namespace gputravel::tdx::testing
