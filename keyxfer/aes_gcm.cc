#include "keyxfer/aes_gcm.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace gputravel {
namespace {

#if defined(__x86_64__)
// Enhanced REP MOVSB (CPUID leaf 7, EBX bit 9).
bool HasErms() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 9)) != 0;
}
const bool kHaveErms = HasErms();
#endif

// Copies a private piece of ciphertext into a bounce slot, through the
// cache: whoever reads the slot next (the emulated copy engine on another
// core, or a GPU's DMA read, which the cache answers) finds it there, where
// streaming stores would send every byte to memory and back. With ERMS,
// REP MOVSB (fast-string stores, which can fill whole cache lines without
// reading them in first) measured faster than memcpy's vector loop at
// this size, which reads each line of the slot before writing it
// (docs/performance.md, (b')).
void CopyToSlot(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__x86_64__)
  if (kHaveErms) {
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

// aligned_alloc wants a multiple of the alignment.
static_assert(AesGcm::kEncryptPiece % 64 == 0 && AesGcm::kDecryptPiece % 64 == 0,
              "the private piece is allocated 64-byte aligned");
static_assert(AesGcm::kEncryptPiece % 96 == 0, "a multiple of the stitched GCM stride");

}  // namespace

struct AesGcm::Ctx {
  EVP_CIPHER_CTX* ctx = nullptr;
  ~Ctx() { EVP_CIPHER_CTX_free(ctx); }  // EVP_CIPHER_CTX_free cleanses the key schedule.
};

AesGcm::~AesGcm() = default;

absl::StatusOr<std::unique_ptr<AesGcm>> AesGcm::Create(const SecretBytes& key) {
  if (key.size() != kAesKeySize) {
    return absl::InvalidArgumentError("AES-256-GCM key must be 32 bytes, got " +
                                      std::to_string(key.size()));
  }
  std::unique_ptr<AesGcm> g(new AesGcm());
  g->enc_ = std::make_unique<Ctx>();
  g->dec_ = std::make_unique<Ctx>();
  g->enc_->ctx = EVP_CIPHER_CTX_new();
  g->dec_->ctx = EVP_CIPHER_CTX_new();
  if (g->enc_->ctx == nullptr || g->dec_->ctx == nullptr ||
      EVP_EncryptInit_ex(g->enc_->ctx, EVP_aes_256_gcm(), nullptr, key.data(),
                         nullptr) != 1 ||
      EVP_DecryptInit_ex(g->dec_->ctx, EVP_aes_256_gcm(), nullptr, key.data(),
                         nullptr) != 1) {
    return absl::InternalError("OpenSSL: cannot initialise AES-256-GCM");
  }
  return g;
}

absl::Status AesGcm::Begin(Ctx* ctx, bool encrypt, const uint8_t iv[kGcmIvSize],
                           const uint8_t* aad, size_t aad_len) {
  EVP_CIPHER_CTX* c = ctx->ctx;
  int len = 0;
  if (EVP_CipherInit_ex(c, nullptr, nullptr, nullptr, iv, encrypt ? 1 : 0) != 1) {
    return absl::InternalError("OpenSSL: GCM IV setup failed");
  }
  if (aad_len > 0 && EVP_CipherUpdate(c, nullptr, &len, aad, static_cast<int>(aad_len)) != 1) {
    return absl::InternalError("OpenSSL: GCM AAD failed");
  }
  return absl::OkStatus();
}

absl::Status AesGcm::Encrypt(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                             size_t aad_len, const uint8_t* in, size_t n,
                             uint8_t* out, uint8_t tag[kGcmTagSize]) {
  absl::Status s = Begin(enc_.get(), true, iv, aad, aad_len);
  if (!s.ok()) return s;
  EVP_CIPHER_CTX* c = enc_->ctx;
  int len = 0;
  // EVP takes int lengths: feed large buffers in 1 GiB pieces.
  size_t done = 0;
  while (done < n) {
    size_t piece = std::min<size_t>(n - done, size_t{1} << 30);
    if (EVP_EncryptUpdate(c, out + done, &len, in + done,
                          static_cast<int>(piece)) != 1) {
      return absl::InternalError("OpenSSL: GCM encrypt failed");
    }
    done += piece;
  }
  if (EVP_EncryptFinal_ex(c, out + n, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, kGcmTagSize, tag) != 1) {
    return absl::InternalError("OpenSSL: GCM finalisation failed");
  }
  return absl::OkStatus();
}

absl::Status AesGcm::CheckTag(const uint8_t tag[kGcmTagSize], uint8_t* out, size_t n) {
  EVP_CIPHER_CTX* c = dec_->ctx;
  int len = 0;
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, kGcmTagSize,
                          const_cast<uint8_t*>(tag)) != 1) {
    return absl::InternalError("OpenSSL: GCM tag setup failed");
  }
  if (EVP_DecryptFinal_ex(c, out + n, &len) != 1) {
    Zeroize(out, n);
    return absl::DataLossError(
        "authentication failed: wrong key, wrong IV/counter, wrong associated "
        "data or tampered ciphertext");
  }
  return absl::OkStatus();
}

absl::Status AesGcm::Decrypt(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                             size_t aad_len, const uint8_t* in, size_t n,
                             const uint8_t tag[kGcmTagSize], uint8_t* out) {
  absl::Status s = Begin(dec_.get(), false, iv, aad, aad_len);
  if (!s.ok()) return s;
  EVP_CIPHER_CTX* c = dec_->ctx;
  int len = 0;
  size_t done = 0;
  while (done < n) {
    size_t piece = std::min<size_t>(n - done, size_t{1} << 30);
    if (EVP_DecryptUpdate(c, out + done, &len, in + done,
                          static_cast<int>(piece)) != 1) {
      Zeroize(out, done);
      return absl::InternalError("OpenSSL: GCM decrypt failed");
    }
    done += piece;
  }
  return CheckTag(tag, out, n);
}

uint8_t* AesGcm::Piece() {
  if (piece_ == nullptr) {
    // One buffer serves both directions.
    piece_ = std::unique_ptr<uint8_t, void (*)(void*)>(
        static_cast<uint8_t*>(std::aligned_alloc(64, std::max(encrypt_piece_, decrypt_piece_))),
        &std::free);
  }
  return piece_.get();
}

absl::Status AesGcm::SetPieceSizes(size_t encrypt_piece, size_t decrypt_piece) {
  for (size_t p : {encrypt_piece, decrypt_piece}) {
    if (p == 0 || p % 64 != 0 || p > (size_t{1} << 20)) {
      return absl::InvalidArgumentError("piece size " + std::to_string(p) +
                                        " is not a multiple of 64 bytes from 64 to 1 MiB");
    }
  }
  encrypt_piece_ = encrypt_piece;
  decrypt_piece_ = decrypt_piece;
  piece_.reset();  // made again at the new size on first use
  return absl::OkStatus();
}

absl::Status AesGcm::EncryptToShared(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                                     size_t aad_len, const uint8_t* in, size_t n,
                                     uint8_t* shared_out, uint8_t tag[kGcmTagSize]) {
  absl::Status s = Begin(enc_.get(), true, iv, aad, aad_len);
  if (!s.ok()) return s;
  EVP_CIPHER_CTX* c = enc_->ctx;
  uint8_t* piece = Piece();
  if (piece == nullptr) return absl::ResourceExhaustedError("out of memory");
  int len = 0;
  for (size_t done = 0; done < n;) {
    const size_t k = std::min(n - done, encrypt_piece_);
    // The tag is computed over `piece`, which nobody else can reach; what
    // lands in shared memory is a copy.
    if (EVP_EncryptUpdate(c, piece, &len, in + done, static_cast<int>(k)) != 1 ||
        static_cast<size_t>(len) != k) {
      return absl::InternalError("OpenSSL: GCM encrypt failed");
    }
    CopyToSlot(shared_out + done, piece, k);
    done += k;
  }
  if (EVP_EncryptFinal_ex(c, piece, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, kGcmTagSize, tag) != 1) {
    return absl::InternalError("OpenSSL: GCM finalisation failed");
  }
  return absl::OkStatus();
}

absl::Status AesGcm::DecryptFromShared(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                                       size_t aad_len, const uint8_t* shared_in, size_t n,
                                       const uint8_t tag[kGcmTagSize], uint8_t* out) {
  absl::Status s = Begin(dec_.get(), false, iv, aad, aad_len);
  if (!s.ok()) return s;
  EVP_CIPHER_CTX* c = dec_->ctx;
  uint8_t* piece = Piece();
  if (piece == nullptr) return absl::ResourceExhaustedError("out of memory");
  int len = 0;
  for (size_t done = 0; done < n;) {
    const size_t k = std::min(n - done, decrypt_piece_);
    // Each byte of shared memory is read once; the tag and the plaintext
    // both come from this private copy.
    std::memcpy(piece, shared_in + done, k);
    if (EVP_DecryptUpdate(c, out + done, &len, piece, static_cast<int>(k)) != 1 ||
        static_cast<size_t>(len) != k) {
      Zeroize(out, done);
      return absl::InternalError("OpenSSL: GCM decrypt failed");
    }
    done += k;
  }
  return CheckTag(tag, out, n);
}

absl::StatusOr<std::string> AesGcm::Seal(const uint8_t iv[kGcmIvSize],
                                         absl::string_view aad,
                                         absl::string_view plaintext) {
  std::string out(plaintext.size() + kGcmTagSize, '\0');
  auto* o = reinterpret_cast<uint8_t*>(&out[0]);
  absl::Status s = Encrypt(iv, reinterpret_cast<const uint8_t*>(aad.data()),
                           aad.size(),
                           reinterpret_cast<const uint8_t*>(plaintext.data()),
                           plaintext.size(), o, o + plaintext.size());
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::string> AesGcm::Open(const uint8_t iv[kGcmIvSize],
                                         absl::string_view aad,
                                         absl::string_view sealed) {
  if (sealed.size() < kGcmTagSize) {
    return absl::InvalidArgumentError("sealed message shorter than its tag");
  }
  size_t n = sealed.size() - kGcmTagSize;
  std::string out(n, '\0');
  auto* in = reinterpret_cast<const uint8_t*>(sealed.data());
  absl::Status s =
      Decrypt(iv, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(), in,
              n, in + n, reinterpret_cast<uint8_t*>(&out[0]));
  if (!s.ok()) return s;
  return out;
}

}  // namespace gputravel
