#include "keyxfer/ec_key.h"

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace gputravel {
namespace {

const char* GroupName(Curve c) {
  return c == Curve::kP384 ? "secp384r1" : "prime256v1";
}

const EVP_MD* DigestFor(EVP_PKEY* pkey) {
  return EVP_PKEY_get_bits(pkey) > 256 ? EVP_sha384() : EVP_sha256();
}

absl::StatusOr<Curve> CurveOf(EVP_PKEY* pkey) {
  char name[64] = {0};
  size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, name,
                                     sizeof(name), &len) != 1) {
    return absl::InvalidArgumentError("key is not an elliptic-curve key");
  }
  std::string n(name, len);
  if (n == "secp384r1") return Curve::kP384;
  if (n == "prime256v1") return Curve::kP256;
  return absl::InvalidArgumentError("unsupported curve " + n +
                                    " (want P-256 or P-384)");
}

[[noreturn]] void PublicPointFailed(const char* what) {
  std::fprintf(stderr, "fatal: OpenSSL cannot encode an EC public key: %s\n", what);
  std::abort();
}

}  // namespace

EcKey::EcKey(EcKey&& o) noexcept : pkey_(o.pkey_), curve_(o.curve_) {
  o.pkey_ = nullptr;
}
EcKey& EcKey::operator=(EcKey&& o) noexcept {
  if (this != &o) {
    EVP_PKEY_free(pkey_);
    pkey_ = o.pkey_;
    curve_ = o.curve_;
    o.pkey_ = nullptr;
  }
  return *this;
}
EcKey::~EcKey() { EVP_PKEY_free(pkey_); }

absl::StatusOr<EcKey> EcKey::Generate(Curve curve) {
  EVP_PKEY* pkey = EVP_EC_gen(GroupName(curve));
  if (pkey == nullptr) return absl::InternalError("OpenSSL: EC key generation failed");
  return EcKey(pkey, curve);
}

absl::StatusOr<EcKey> EcKey::FromPkey(EVP_PKEY* pkey) {
  auto curve = CurveOf(pkey);
  if (!curve.ok()) {
    EVP_PKEY_free(pkey);
    return curve.status();
  }
  return EcKey(pkey, *curve);
}

absl::StatusOr<EcKey> EcKey::FromPrivatePem(absl::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::InternalError("OpenSSL: cannot allocate a memory BIO");
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (pkey == nullptr) return absl::InvalidArgumentError("not a PEM private key");
  return FromPkey(pkey);
}

absl::StatusOr<EcKey> EcKey::FromPublicPoint(Curve curve,
                                             absl::string_view point) {
  size_t want = curve == Curve::kP384 ? 97 : 65;
  if (point.size() != want || point[0] != 0x04) {
    return absl::InvalidArgumentError(
        "public key must be an uncompressed point of " + std::to_string(want) +
        " bytes, got " + std::to_string(point.size()));
  }
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  if (bld == nullptr) return absl::InternalError("OpenSSL: cannot allocate a parameter builder");
  OSSL_PARAM* params = nullptr;
  if (OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, GroupName(curve),
                                      0) == 1 &&
      OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) == 1) {
    params = OSSL_PARAM_BLD_to_param(bld);
  }
  OSSL_PARAM_BLD_free(bld);
  if (params == nullptr) {
    return absl::InternalError("OpenSSL: cannot build the public key's parameters");
  }
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr);
  if (ctx == nullptr) {
    OSSL_PARAM_free(params);
    return absl::InternalError("OpenSSL: cannot allocate an EC key context");
  }
  EVP_PKEY* pkey = nullptr;
  bool ok = EVP_PKEY_fromdata_init(ctx) == 1 &&
            EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) == 1;
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  if (!ok || pkey == nullptr) {
    EVP_PKEY_free(pkey);
    return absl::InvalidArgumentError("public key is not a valid point on the curve");
  }
  // fromdata does not check that the point is on the curve: do it explicitly,
  // invalid-curve points are a classic ECDH attack. The quick check (on the
  // curve, not the point at infinity, coordinates in range) is the complete
  // validation here: P-256 and P-384 have cofactor 1, so every such point has
  // the group's prime order (NIST SP 800-56A partial public-key validation).
  // The full check would add an n*Q scalar multiplication, as costly as the
  // ECDH itself (~0.75 ms on P-384), to every key agreement.
  EVP_PKEY_CTX* check = EVP_PKEY_CTX_new(pkey, nullptr);
  if (check == nullptr) {
    EVP_PKEY_free(pkey);
    return absl::InternalError("OpenSSL: cannot allocate an EC key check context");
  }
  int valid = EVP_PKEY_public_check_quick(check);
  EVP_PKEY_CTX_free(check);
  if (valid != 1) {
    EVP_PKEY_free(pkey);
    return absl::InvalidArgumentError("public key is not a valid point on the curve");
  }
  return EcKey(pkey, curve);
}

// Cannot fail for a key this class holds (every way to make one checks it is
// an EC key on a supported curve), so it has no error to return. An empty
// point would still go into a channel transcript or a certificate, so a
// failure (a moved-from key, a broken OpenSSL) stops the process instead, as
// RandomBytes does (keyxfer/random.cc).
std::string EcKey::PublicPoint() const {
  if (pkey_ == nullptr) PublicPointFailed("no key (moved from)");
  size_t len = 0;
  if (EVP_PKEY_get_octet_string_param(pkey_, OSSL_PKEY_PARAM_PUB_KEY, nullptr, 0, &len) != 1 ||
      len == 0) {
    PublicPointFailed("length query failed");
  }
  std::string out(len, '\0');
  if (EVP_PKEY_get_octet_string_param(pkey_, OSSL_PKEY_PARAM_PUB_KEY,
                                      reinterpret_cast<unsigned char*>(&out[0]), len,
                                      &len) != 1 ||
      len == 0) {
    PublicPointFailed("encoding failed");
  }
  out.resize(len);
  return out;
}

absl::StatusOr<SecretBytes> EcKey::DeriveSharedSecret(
    absl::string_view peer_point) const {
  auto peer = FromPublicPoint(curve_, peer_point);
  if (!peer.ok()) return peer.status();
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(pkey_, nullptr);
  size_t len = 0;
  if (ctx == nullptr || EVP_PKEY_derive_init(ctx) != 1 ||
      // validate_peer = 0: FromPublicPoint has just validated the point
      // completely; the default would repeat it with an extra n*Q product.
      EVP_PKEY_derive_set_peer_ex(ctx, peer->pkey(), 0) != 1 ||
      EVP_PKEY_derive(ctx, nullptr, &len) != 1) {
    EVP_PKEY_CTX_free(ctx);
    return absl::InternalError("OpenSSL: ECDH setup failed");
  }
  SecretBytes secret(len);
  int rc = EVP_PKEY_derive(ctx, secret.data(), &len);
  EVP_PKEY_CTX_free(ctx);
  if (rc != 1) return absl::InternalError("OpenSSL: ECDH derivation failed");
  return secret;
}

absl::StatusOr<std::string> EcKey::Sign(absl::string_view data) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return absl::InternalError("OpenSSL: cannot allocate a digest context");
  size_t len = 0;
  if (EVP_DigestSignInit(ctx, nullptr, DigestFor(pkey_), nullptr, pkey_) != 1 ||
      EVP_DigestSign(ctx, nullptr, &len,
                     reinterpret_cast<const unsigned char*>(data.data()),
                     data.size()) != 1) {
    EVP_MD_CTX_free(ctx);
    return absl::InternalError("OpenSSL: ECDSA sign setup failed");
  }
  std::string sig(len, '\0');
  int rc = EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(&sig[0]), &len,
                          reinterpret_cast<const unsigned char*>(data.data()),
                          data.size());
  EVP_MD_CTX_free(ctx);
  if (rc != 1) return absl::InternalError("OpenSSL: ECDSA sign failed");
  sig.resize(len);
  return sig;
}

absl::Status EcKey::Verify(absl::string_view data,
                           absl::string_view signature_der) const {
  return VerifyEcdsa(pkey_, data, signature_der);
}

absl::Status VerifyEcdsa(EVP_PKEY* pkey, absl::string_view data,
                         absl::string_view signature_der) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return absl::InternalError("OpenSSL: cannot allocate a digest context");
  int rc = EVP_DigestVerifyInit(ctx, nullptr, DigestFor(pkey), nullptr, pkey);
  if (rc == 1) {
    rc = EVP_DigestVerify(
        ctx, reinterpret_cast<const unsigned char*>(signature_der.data()),
        signature_der.size(), reinterpret_cast<const unsigned char*>(data.data()),
        data.size());
  }
  EVP_MD_CTX_free(ctx);
  if (rc != 1) return absl::UnauthenticatedError("ECDSA signature does not verify");
  return absl::OkStatus();
}

absl::StatusOr<SecretBytes> EcKey::PrivateKeyPem() const {
  BIO* bio = BIO_new(BIO_s_secmem());
  if (bio == nullptr) bio = BIO_new(BIO_s_mem());
  if (PEM_write_bio_PrivateKey(bio, pkey_, nullptr, nullptr, 0, nullptr,
                               nullptr) != 1) {
    BIO_free(bio);
    return absl::InternalError("OpenSSL: cannot encode private key");
  }
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  if (n <= 0 || p == nullptr) {
    BIO_free(bio);
    return absl::InternalError("OpenSSL: cannot encode private key");
  }
  SecretBytes out(reinterpret_cast<uint8_t*>(p), static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

}  // namespace gputravel
