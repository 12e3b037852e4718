#ifndef GPUTRAVEL_AUTH_IDENTITY_CACHE_H_
#define GPUTRAVEL_AUTH_IDENTITY_CACHE_H_

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "auth/identity.h"

namespace gputravel {

// IdentityFromCertificate, remembered by the certificate's exact bytes.
//
// A server authorizes every call by the identity in the peer's certificate;
// parsing that certificate (PEM, X.509, subjectAltName) cost more than the
// rest of a MUX Route call. The identity is a pure function of the bytes, so
// a certificate seen before maps to the same identity without parsing it
// again. Only the mapping is cached: whether the certificate is trusted is
// still decided by the TLS handshake of every connection, before any call
// reaches Authorize. Certificates that do not parse are not cached (each
// call gets the full error). Holds at most `capacity` certificates; when
// full it starts over, so a peer cycling through certificates costs parsing,
// never memory. Thread-safe.
class IdentityCache {
 public:
  explicit IdentityCache(size_t capacity = 256) : capacity_(capacity) {}

  absl::StatusOr<Identity> Get(absl::string_view pem_or_der);

  size_t size() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Identity> by_cert_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_AUTH_IDENTITY_CACHE_H_
