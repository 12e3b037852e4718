#ifndef GPUTRAVEL_DEVICE_BOUNCE_POOL_H_
#define GPUTRAVEL_DEVICE_BOUNCE_POOL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "device/bounce_buffer.h"

namespace gputravel {

// The holder's bounce ring, kept from one write to the next, as the NVIDIA
// driver keeps its pool of unprotected sysmem bounce buffers instead of
// converting pages on every copy. Creating and populating a ring in /dev/shm
// costs about 0.6 ms per MiB here (4.6 ms for the default 4 x 2 MiB) and
// tearing it down another 1.4 ms, against 0.4 ms for the device to map an
// existing one; a fresh ring per trip paid that on every trip.
//
// The ring only ever holds ciphertext (see BounceBuffer), so reusing it across
// trips and sessions stages nothing the host could not already read: a slot
// written under an old session key is unreadable once that key is gone. The
// device maps the ring anew on every trip (AttachBounce, or the doorbell of a
// one-chunk window) and drops it when the trip's last doorbell releases it or
// the session ends.
//
// One ring is kept, of the geometry last asked for; a write with a different
// geometry replaces it. A ring is lent to one write at a time: a second lease
// taken while the kept ring is lent gets a fresh ring of its own, removed when
// that lease ends.
class BouncePool {
 public:
  // Rings are created in `dir` (a tmpfs such as /dev/shm) with random names,
  // "gputravel-bounce-<owner>-<random>" when `owner` is given (a holder's
  // name), so that RemoveOrphanedRings finds the rings of its own earlier
  // life. `owner` is a holder name (letters, digits, '.', '_', '-').
  explicit BouncePool(std::string dir, std::string owner = "")
      : dir_(std::move(dir)), owner_(std::move(owner)) {}
  ~BouncePool() = default;
  BouncePool(const BouncePool&) = delete;
  BouncePool& operator=(const BouncePool&) = delete;

  // A ring lent to one write; gives it back when destroyed. A lease must
  // not outlive its pool.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept;
    ~Lease();

    BounceBuffer* ring() const { return ring_; }
    // True when the ring was created for this lease (not reused).
    bool fresh() const { return fresh_; }

   private:
    friend class BouncePool;
    BouncePool* pool_ = nullptr;          // null for a private ring
    BounceBuffer* ring_ = nullptr;
    std::unique_ptr<BounceBuffer> own_;  // a private ring, removed with the lease
    bool fresh_ = false;
  };

  // Lends a ring of exactly `slots` x `slot_size` bytes.
  absl::StatusOr<Lease> Acquire(uint32_t slots, uint32_t slot_size);

  // Rings created so far (kept or private), for tests and the benchmark.
  uint64_t created() const;

  // Removes the kept ring's file now (a daemon that stops without running
  // destructors); a write still using the ring keeps its mapping. The next
  // Acquire creates a new ring.
  void RemoveKeptRing();

  // Removes the rings an earlier process of the same owner left in `dir`
  // (killed before it could remove them), returning how many. Only for a
  // process that holds the owner's exclusive lock on `dir` (the holder
  // agent's ring lock), before its first Acquire: any ring of that owner is
  // then an orphan. FailedPrecondition without an owner; an unreadable
  // directory or a file that cannot be removed is an error naming it.
  absl::StatusOr<int> RemoveOrphanedRings();

 private:
  absl::StatusOr<std::unique_ptr<BounceBuffer>> CreateRing(uint32_t slots,
                                                           uint32_t slot_size);
  void Return();

  std::string RingPrefix() const;

  const std::string dir_;
  const std::string owner_;
  mutable absl::Mutex mu_;
  std::unique_ptr<BounceBuffer> kept_ ABSL_GUARDED_BY(mu_);
  // Removed by RemoveKeptRing while lent: unmapped when the lease ends.
  std::unique_ptr<BounceBuffer> retired_ ABSL_GUARDED_BY(mu_);
  bool lent_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t created_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_BOUNCE_POOL_H_
