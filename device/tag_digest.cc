#include "device/tag_digest.h"

#include "keyxfer/aes_gcm.h"

namespace gputravel {
namespace {

constexpr char kDigestLabel[] = "gputravel-window-digest-v1";

}  // namespace

TagDigest::TagDigest() : ctx_(EVP_MD_CTX_new()) {
  ok_ = ctx_ != nullptr && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1 &&
        EVP_DigestUpdate(ctx_, kDigestLabel, sizeof(kDigestLabel) - 1) == 1;
}

TagDigest::~TagDigest() { EVP_MD_CTX_free(ctx_); }

void TagDigest::Add(const uint8_t* tag) {
  ok_ = ok_ && EVP_DigestUpdate(ctx_, tag, kGcmTagSize) == 1;
}

absl::StatusOr<std::string> TagDigest::Final() {
  unsigned char out[32];
  unsigned int len = 0;
  const bool done = ok_ && EVP_DigestFinal_ex(ctx_, out, &len) == 1 && len == sizeof(out);
  ok_ = false;  // finalised (or failed): no second use
  if (!done) return absl::InternalError("OpenSSL SHA-256 of the window's tags failed");
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace gputravel
