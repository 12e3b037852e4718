#ifndef GPUTRAVEL_KEYXFER_AES_GCM_H_
#define GPUTRAVEL_KEYXFER_AES_GCM_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
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

  // The same, for memory that others can write while the call runs (a bounce
  // buffer shared with the untrusted host). OpenSSL reads what it has just
  // written, or what it reads, more than once (the tag is computed over the
  // ciphertext in `out` for Encrypt, and `in` is read for the tag and for
  // the plaintext by Decrypt), so a writer racing the call could make the
  // tag cover bytes this call did not produce, or make plaintext of bytes
  // the tag did not cover. These go through private memory, one piece at a
  // time: EncryptToShared makes each piece of ciphertext privately and only
  // then copies it to `out`; DecryptFromShared reads each byte of `in` once,
  // into private memory, and decrypts that. `out` and `in` must not overlap.
  absl::Status EncryptToShared(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                               size_t aad_len, const uint8_t* in, size_t n,
                               uint8_t* shared_out, uint8_t tag[kGcmTagSize]);
  absl::Status DecryptFromShared(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                                 size_t aad_len, const uint8_t* shared_in, size_t n,
                                 const uint8_t tag[kGcmTagSize], uint8_t* out);
  // The private piece both go through, in the L1 cache. Measured on 2 MiB
  // chunks read from a large source into a /dev/shm slot: 4-8 KiB pieces
  // cost about 7% of AES-GCM's own time when encrypting, 16 KiB 13%, 64 KiB
  // 20%; decrypting, 4 KiB costs about 3%.
  static constexpr size_t kSharedPiece = 4 * 1024;

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
  // Begins a message: IV and AAD.
  absl::Status Begin(Ctx* ctx, bool encrypt, const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                     size_t aad_len);
  absl::Status CheckTag(const uint8_t tag[kGcmTagSize], uint8_t* out, size_t n);
  uint8_t* Piece();

  std::unique_ptr<Ctx> enc_;
  std::unique_ptr<Ctx> dec_;
  // For the *Shared calls (ciphertext only), 64-byte aligned.
  std::unique_ptr<uint8_t, void (*)(void*)> piece_{nullptr, &std::free};
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_AES_GCM_H_
