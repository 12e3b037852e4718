#ifndef GPUTRAVEL_KEYXFER_HKDF_H_
#define GPUTRAVEL_KEYXFER_HKDF_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

// HKDF (RFC 5869) with SHA-384, through OpenSSL's EVP_KDF.
absl::StatusOr<SecretBytes> HkdfSha384Extract(absl::string_view salt,
                                              const SecretBytes& ikm);
absl::StatusOr<SecretBytes> HkdfSha384Expand(const SecretBytes& prk,
                                             absl::string_view info,
                                             size_t length);

// SHA-384 / SHA-256 digests (public data only: transcripts, digests).
std::string Sha384(absl::string_view data);
std::string Sha256(absl::string_view data);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_HKDF_H_
