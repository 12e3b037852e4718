#ifndef GPUTRAVEL_KEYXFER_AES_GCM_H_
#define GPUTRAVEL_KEYXFER_AES_GCM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

inline constexpr size_t kAesKeySize = 32;
inline constexpr size_t kGcmIvSize = 12;
inline constexpr size_t kGcmTagSize = 16;

// AES-256-GCM with an explicit 96-bit IV (OpenSSL EVP). The context is set up
// with the key once and reused per message, which matters on the data path.
// Not thread-safe: use one instance per thread.
class AesGcm {
 public:
  static absl::StatusOr<std::unique_ptr<AesGcm>> Create(const SecretBytes& key);
  ~AesGcm();

  // Encrypts `n` bytes from `in` to `out` (may alias) and writes the tag.
  absl::Status Encrypt(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                       size_t aad_len, const uint8_t* in, size_t n,
                       uint8_t* out, uint8_t tag[kGcmTagSize]);
  // Decrypts and checks the tag; on a bad tag returns DATA_LOSS and leaves
  // `out` zeroized (no unauthenticated plaintext escapes).
  absl::Status Decrypt(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                       size_t aad_len, const uint8_t* in, size_t n,
                       const uint8_t tag[kGcmTagSize], uint8_t* out);

  // Convenience: ciphertext || tag.
  absl::StatusOr<std::string> Seal(const uint8_t iv[kGcmIvSize],
                                   absl::string_view aad,
                                   absl::string_view plaintext);
  absl::StatusOr<std::string> Open(const uint8_t iv[kGcmIvSize],
                                   absl::string_view aad,
                                   absl::string_view sealed);

 private:
  AesGcm() = default;
  struct Ctx;
  std::unique_ptr<Ctx> enc_;
  std::unique_ptr<Ctx> dec_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_AES_GCM_H_
