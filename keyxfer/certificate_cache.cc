#include "keyxfer/certificate_cache.h"

#include <utility>

namespace gputravel {

absl::StatusOr<std::shared_ptr<const VerifiedCertificate>> CertificateCache::Verify(
    absl::string_view der) {
  const absl::Time now = clock_();
  {
    absl::MutexLock l(&mu_);
    auto it = by_der_.find(der);
    if (it != by_der_.end()) {
      if (now - it->second.verified_at < recheck_ && now >= it->second.verified_at) {
        return it->second.cert;
      }
      by_der_.erase(it);
    }
  }
  absl::StatusOr<VerifiedCertificate> checked = VerifyCertificate(der, ca_der_);
  if (!checked.ok()) return checked.status();
  auto cert = std::make_shared<const VerifiedCertificate>(std::move(*checked));
  absl::MutexLock l(&mu_);
  if (by_der_.size() >= capacity_) by_der_.clear();
  by_der_[std::string(der)] = Entry{cert, now};
  return cert;
}

size_t CertificateCache::size() const {
  absl::MutexLock l(&mu_);
  return by_der_.size();
}

}  // namespace gputravel
