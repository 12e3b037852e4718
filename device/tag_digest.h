#ifndef GPUTRAVEL_DEVICE_TAG_DIGEST_H_
#define GPUTRAVEL_DEVICE_TAG_DIGEST_H_

#include <openssl/evp.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gputravel {

// The digest a holder reports for a window and the orchestrator recomputes
// from what it read back: SHA-256 over a label and the window's GCM tags, in
// counter order. Every EVP call is checked: a digest that failed is an
// error, never a value that could "match" another failed one. Single use.
class TagDigest {
 public:
  TagDigest();
  ~TagDigest();
  TagDigest(const TagDigest&) = delete;
  TagDigest& operator=(const TagDigest&) = delete;

  // Adds one 16-byte tag.
  void Add(const uint8_t* tag);
  // The 32-byte digest; INTERNAL if any OpenSSL call failed, or on a second
  // call.
  absl::StatusOr<std::string> Final();

  // Tests of the EVP checks only: behaves as if the last OpenSSL call failed.
  void FailForTest() { ok_ = false; }

 private:
  EVP_MD_CTX* ctx_;
  bool ok_ = false;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_TAG_DIGEST_H_
