#ifndef GPUTRAVEL_KEYXFER_CERTIFICATE_CACHE_H_
#define GPUTRAVEL_KEYXFER_CERTIFICATE_CACHE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "keyxfer/x509.h"

namespace gputravel {

// VerifyCertificate against one pinned CA, remembered by the certificate's
// exact DER bytes for `recheck`.
//
// The same few certificates (a GPU's, each TD's attestation key) are presented
// on every trip; checking the chain each time cost a signature verification
// and an X.509 parse. A certificate is only ever trusted because it verified
// against the CA within the last `recheck` (its validity period included, so
// one that expires is refused at most `recheck` late); any other bytes,
// however close, are verified in full. Failures are not remembered: each
// attempt gets the full error. Holds at most `capacity` certificates and
// starts over when full. Thread-safe.
class CertificateCache {
 public:
  CertificateCache(std::string ca_der, absl::Duration recheck, size_t capacity = 16,
                   std::function<absl::Time()> clock = absl::Now)
      : ca_der_(std::move(ca_der)),
        recheck_(recheck),
        capacity_(capacity),
        clock_(std::move(clock)) {}

  absl::StatusOr<std::shared_ptr<const VerifiedCertificate>> Verify(absl::string_view der);

  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<const VerifiedCertificate> cert;
    absl::Time verified_at;
  };
  const std::string ca_der_;
  const absl::Duration recheck_;
  const size_t capacity_;
  const std::function<absl::Time()> clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> by_der_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_CERTIFICATE_CACHE_H_
