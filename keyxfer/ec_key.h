#ifndef GPUTRAVEL_KEYXFER_EC_KEY_H_
#define GPUTRAVEL_KEYXFER_EC_KEY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/secret_bytes.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace gputravel {

enum class Curve { kP256, kP384 };

// An elliptic-curve key (OpenSSL EVP_PKEY): ephemeral ECDH keys and long-term
// ECDSA signing keys. The private half never leaves the object except through
// PrivateKeyPem, used only to write a 0600 key file at provisioning time.
class EcKey {
 public:
  static absl::StatusOr<EcKey> Generate(Curve curve);
  static absl::StatusOr<EcKey> FromPrivatePem(absl::string_view pem);
  // Public key only, from an uncompressed point (0x04 || X || Y).
  static absl::StatusOr<EcKey> FromPublicPoint(Curve curve,
                                               absl::string_view point);
  // Takes ownership of `pkey`.
  static absl::StatusOr<EcKey> FromPkey(EVP_PKEY* pkey);

  EcKey(EcKey&&) noexcept;
  EcKey& operator=(EcKey&&) noexcept;
  ~EcKey();

  Curve curve() const { return curve_; }
  EVP_PKEY* pkey() const { return pkey_; }

  // Uncompressed public point (97 bytes for P-384, 65 for P-256).
  std::string PublicPoint() const;
  // ECDH with a peer's uncompressed point on the same curve; refuses points not
  // on the curve (OpenSSL checks).
  absl::StatusOr<SecretBytes> DeriveSharedSecret(absl::string_view peer_point) const;
  // ECDSA (DER signature) with SHA-384 on P-384, SHA-256 on P-256.
  absl::StatusOr<std::string> Sign(absl::string_view data) const;
  absl::Status Verify(absl::string_view data, absl::string_view signature_der) const;
  absl::StatusOr<SecretBytes> PrivateKeyPem() const;

 private:
  EcKey(EVP_PKEY* pkey, Curve curve) : pkey_(pkey), curve_(curve) {}
  EVP_PKEY* pkey_ = nullptr;
  Curve curve_ = Curve::kP384;
};

// Verifies an ECDSA signature with the public key of `pkey` (not owned).
absl::Status VerifyEcdsa(EVP_PKEY* pkey, absl::string_view data,
                         absl::string_view signature_der);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_EC_KEY_H_
