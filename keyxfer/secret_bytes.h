#ifndef GPUTRAVEL_KEYXFER_SECRET_BYTES_H_
#define GPUTRAVEL_KEYXFER_SECRET_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace gputravel {

// Owns key material. Zeroized (OPENSSL_cleanse) on destruction, on Clear() and
// before any reallocation; never printable (no operator<<, no ToString). Copying
// is explicit (Clone) so a second copy of a key is visible in review.
class SecretBytes {
 public:
  SecretBytes() = default;
  explicit SecretBytes(size_t size);
  SecretBytes(const uint8_t* data, size_t size);
  static SecretBytes FromString(absl::string_view s);
  ~SecretBytes();

  SecretBytes(SecretBytes&& other) noexcept;
  SecretBytes& operator=(SecretBytes&& other) noexcept;
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;

  SecretBytes Clone() const { return SecretBytes(data_.data(), data_.size()); }

  uint8_t* data() { return data_.data(); }
  const uint8_t* data() const { return data_.data(); }
  size_t size() const { return data_.size(); }
  bool empty() const { return data_.empty(); }

  // Zeroizes and releases the bytes.
  void Clear();

  // Constant-time comparison.
  bool Equals(const SecretBytes& other) const;

 private:
  std::vector<uint8_t> data_;
};

// Zeroizes arbitrary memory (OPENSSL_cleanse): for plaintext staging areas.
void Zeroize(void* p, size_t n);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_SECRET_BYTES_H_
