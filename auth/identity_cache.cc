#include "auth/identity_cache.h"

namespace gputravel {

absl::StatusOr<Identity> IdentityCache::Get(absl::string_view pem_or_der) {
  {
    absl::MutexLock l(&mu_);
    auto it = by_cert_.find(pem_or_der);
    if (it != by_cert_.end()) return it->second;
  }
  absl::StatusOr<Identity> id = IdentityFromCertificate(pem_or_der);
  if (!id.ok()) return id;
  absl::MutexLock l(&mu_);
  if (by_cert_.size() >= capacity_) by_cert_.clear();
  by_cert_.emplace(std::string(pem_or_der), *id);
  return id;
}

size_t IdentityCache::size() const {
  absl::MutexLock l(&mu_);
  return by_cert_.size();
}

}  // namespace gputravel
