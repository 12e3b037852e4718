#include "keyxfer/hkdf.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstdio>
#include <cstdlib>

namespace gputravel {
namespace {

absl::StatusOr<SecretBytes> Hkdf(int mode, absl::string_view salt,
                                 const uint8_t* key, size_t key_len,
                                 absl::string_view info, size_t out_len) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return absl::InternalError("OpenSSL: HKDF unavailable");
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return absl::InternalError("OpenSSL: HKDF context");
  char digest[] = "SHA384";
  OSSL_PARAM params[6];
  int n = 0;
  params[n++] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = OSSL_PARAM_construct_octet_string(
      OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(key), key_len);
  if (mode != EVP_KDF_HKDF_MODE_EXPAND_ONLY) {
    params[n++] = OSSL_PARAM_construct_octet_string(
        OSSL_KDF_PARAM_SALT, const_cast<char*>(salt.data()), salt.size());
  }
  if (mode != EVP_KDF_HKDF_MODE_EXTRACT_ONLY) {
    params[n++] = OSSL_PARAM_construct_octet_string(
        OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size());
  }
  params[n] = OSSL_PARAM_construct_end();
  SecretBytes out(out_len);
  int rc = EVP_KDF_derive(ctx, out.data(), out.size(), params);
  EVP_KDF_CTX_free(ctx);
  if (rc != 1) return absl::InternalError("OpenSSL: HKDF derivation failed");
  return out;
}

// A digest that failed would come back empty or short, and an empty digest
// compares equal to another empty one (transcripts, report data): there is
// no safe value to return, so a failure stops the process, as RandomBytes
// does (keyxfer/random.cc). It only happens with a broken OpenSSL.
std::string Digest(const EVP_MD* md, const char* name, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (md == nullptr || EVP_Digest(data.data(), data.size(), out, &len, md, nullptr) != 1 ||
      len == 0 || static_cast<int>(len) != EVP_MD_get_size(md)) {
    std::fprintf(stderr, "fatal: OpenSSL %s digest failed\n", name);
    std::abort();
  }
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace

absl::StatusOr<SecretBytes> HkdfSha384Extract(absl::string_view salt,
                                              const SecretBytes& ikm) {
  return Hkdf(EVP_KDF_HKDF_MODE_EXTRACT_ONLY, salt, ikm.data(), ikm.size(), "",
              48);
}

absl::StatusOr<SecretBytes> HkdfSha384Expand(const SecretBytes& prk,
                                             absl::string_view info,
                                             size_t length) {
  return Hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, "", prk.data(), prk.size(), info,
              length);
}

std::string Sha384(absl::string_view data) { return Digest(EVP_sha384(), "SHA-384", data); }
std::string Sha256(absl::string_view data) { return Digest(EVP_sha256(), "SHA-256", data); }

}  // namespace gputravel
