#include "keyxfer/aes_gcm.h"

#include <openssl/evp.h>

namespace gputravel {

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

absl::Status AesGcm::Encrypt(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                             size_t aad_len, const uint8_t* in, size_t n,
                             uint8_t* out, uint8_t tag[kGcmTagSize]) {
  EVP_CIPHER_CTX* c = enc_->ctx;
  int len = 0;
  if (EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv) != 1) {
    return absl::InternalError("OpenSSL: GCM IV setup failed");
  }
  if (aad_len > 0 &&
      EVP_EncryptUpdate(c, nullptr, &len, aad, static_cast<int>(aad_len)) != 1) {
    return absl::InternalError("OpenSSL: GCM AAD failed");
  }
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

absl::Status AesGcm::Decrypt(const uint8_t iv[kGcmIvSize], const uint8_t* aad,
                             size_t aad_len, const uint8_t* in, size_t n,
                             const uint8_t tag[kGcmTagSize], uint8_t* out) {
  EVP_CIPHER_CTX* c = dec_->ctx;
  int len = 0;
  if (EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, iv) != 1) {
    return absl::InternalError("OpenSSL: GCM IV setup failed");
  }
  if (aad_len > 0 &&
      EVP_DecryptUpdate(c, nullptr, &len, aad, static_cast<int>(aad_len)) != 1) {
    return absl::InternalError("OpenSSL: GCM AAD failed");
  }
  size_t done = 0;
  while (done < n) {
    size_t piece = std::min<size_t>(n - done, size_t{1} << 30);
    if (EVP_DecryptUpdate(c, out + done, &len, in + done,
                          static_cast<int>(piece)) != 1) {
      return absl::InternalError("OpenSSL: GCM decrypt failed");
    }
    done += piece;
  }
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
