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
  // The private pieces, in the L1 cache. Measured with OpenSSL 3.0 on 2 MiB
  // chunks between a large buffer and a /dev/shm slot (//bench:piece_bench,
  // docs/performance.md). Encrypting, the piece is a multiple of 96 bytes, the stride of
  // OpenSSL's stitched AES-NI GCM loop, so no piece leaves a tail to its
  // slower one-block path: 8064 bytes (84 x 96) costs about 1-3% less than
  // 4096, which leaves a 64-byte tail in every piece; 16 KiB and more cost
  // more (13-20% against 7-8% for the copy as a whole). Decrypting, 4 KiB
  // costs about 3% and larger pieces more (the copy in goes through the
  // cache).
  static constexpr size_t kEncryptPiece = 84 * 96;
  static constexpr size_t kDecryptPiece = 4 * 1024;
  // Other piece sizes for this instance, for measuring the choice above
  // (bench/piece_bench): multiples of 64 bytes (the piece is allocated
  // 64-byte aligned) from 64 bytes to 1 MiB, else INVALID_ARGUMENT.
  absl::Status SetPieceSizes(size_t encrypt_piece, size_t decrypt_piece);

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
  // For the *Shared calls (ciphertext only), 64-byte aligned, the larger
  // of the two piece sizes.
  std::unique_ptr<uint8_t, void (*)(void*)> piece_{nullptr, &std::free};
  size_t encrypt_piece_ = kEncryptPiece;
  size_t decrypt_piece_ = kDecryptPiece;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_AES_GCM_H_
