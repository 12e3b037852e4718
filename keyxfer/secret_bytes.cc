#include "keyxfer/secret_bytes.h"

#include <openssl/crypto.h>

#include <utility>

namespace gputravel {

SecretBytes::SecretBytes(size_t size) : data_(size, 0) {}

SecretBytes::SecretBytes(const uint8_t* data, size_t size)
    : data_(data, data + size) {}

SecretBytes SecretBytes::FromString(absl::string_view s) {
  return SecretBytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

SecretBytes::~SecretBytes() { Clear(); }

SecretBytes::SecretBytes(SecretBytes&& other) noexcept
    : data_(std::move(other.data_)) {
  other.data_.clear();
}

SecretBytes& SecretBytes::operator=(SecretBytes&& other) noexcept {
  if (this != &other) {
    Clear();
    data_ = std::move(other.data_);
    other.data_.clear();
  }
  return *this;
}

void SecretBytes::Clear() {
  if (!data_.empty()) OPENSSL_cleanse(data_.data(), data_.size());
  data_.clear();
  data_.shrink_to_fit();
}

bool SecretBytes::Equals(const SecretBytes& other) const {
  return data_.size() == other.data_.size() &&
         CRYPTO_memcmp(data_.data(), other.data_.data(), data_.size()) == 0;
}

void Zeroize(void* p, size_t n) {
  if (p != nullptr && n > 0) OPENSSL_cleanse(p, n);
}

}  // namespace gputravel
