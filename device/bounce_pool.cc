#include "device/bounce_pool.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "keyxfer/random.h"
#include "util/files.h"
#include "util/hex.h"

namespace gputravel {

BouncePool::Lease& BouncePool::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    if (pool_ != nullptr) pool_->Return();
    pool_ = std::exchange(o.pool_, nullptr);
    ring_ = std::exchange(o.ring_, nullptr);
    own_ = std::move(o.own_);
    fresh_ = std::exchange(o.fresh_, false);
  }
  return *this;
}

BouncePool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->Return();
}

absl::StatusOr<std::unique_ptr<BounceBuffer>> BouncePool::CreateRing(
    uint32_t slots, uint32_t slot_size) {
  auto ring = BounceBuffer::Create(dir_ + "/" + RingPrefix() + HexEncode(RandomString(8)),
                                   slots, slot_size);
  if (ring.ok()) {
    absl::MutexLock l(&mu_);
    ++created_;
  }
  return ring;
}

std::string BouncePool::RingPrefix() const {
  return owner_.empty() ? "gputravel-bounce-" : "gputravel-bounce-" + owner_ + "-";
}

absl::StatusOr<int> BouncePool::RemoveOrphanedRings() {
  if (owner_.empty()) {
    return absl::FailedPreconditionError(
        "bounce rings without an owner cannot be told from another process's");
  }
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) {
    return absl::UnavailableError("cannot read bounce_dir " + dir_ + ": " +
                                  std::strerror(errno));
  }
  const std::string prefix = RingPrefix();
  int removed = 0;
  absl::Status status;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // Another owner's name may extend this one's ("h1" and "h1-a"): an
    // orphan's rest is exactly the random hex of CreateRing.
    const std::string rest = name.substr(prefix.size());
    if (rest.size() != 16 || rest.find_first_not_of("0123456789abcdef") != std::string::npos) {
      continue;
    }
    if (::unlink((dir_ + "/" + name).c_str()) != 0 && errno != ENOENT) {
      status = absl::UnavailableError("cannot remove the orphaned bounce ring " + dir_ + "/" +
                                      name + ": " + std::strerror(errno));
      break;
    }
    ++removed;
  }
  ::closedir(d);
  if (!status.ok()) return status;
  return removed;
}

absl::StatusOr<BouncePool::Lease> BouncePool::Acquire(uint32_t slots,
                                                      uint32_t slot_size) {
  Lease lease;
  std::unique_ptr<BounceBuffer> old;  // removed outside the lock
  {
    absl::MutexLock l(&mu_);
    if (!lent_) {
      if (kept_ != nullptr && kept_->slots() == slots &&
          kept_->slot_size() == slot_size) {
        lent_ = true;
        lease.pool_ = this;
        lease.ring_ = kept_.get();
        return std::move(lease);
      }
      old = std::move(kept_);
      lent_ = true;  // reserved while the new ring is made
      lease.pool_ = this;
    }
  }
  old.reset();
  auto ring = CreateRing(slots, slot_size);
  if (!ring.ok()) return ring.status();  // the lease gives the reservation back
  lease.fresh_ = true;
  if (lease.pool_ == nullptr) {
    // The kept ring is lent to another write: this one gets its own.
    lease.own_ = std::move(*ring);
    lease.ring_ = lease.own_.get();
    return std::move(lease);
  }
  absl::MutexLock l(&mu_);
  kept_ = std::move(*ring);
  lease.ring_ = kept_.get();
  return std::move(lease);
}

void BouncePool::Return() {
  std::unique_ptr<BounceBuffer> gone;
  absl::MutexLock l(&mu_);
  lent_ = false;
  gone = std::move(retired_);
}

void BouncePool::RemoveKeptRing() {
  std::unique_ptr<BounceBuffer> gone;  // unmapped outside the lock
  absl::MutexLock l(&mu_);
  if (kept_ == nullptr) return;
  kept_->Unlink();
  if (lent_) {
    retired_ = std::move(kept_);  // the lease's write still maps it
  } else {
    gone = std::move(kept_);
  }
}

uint64_t BouncePool::created() const {
  absl::MutexLock l(&mu_);
  return created_;
}

}  // namespace gputravel
