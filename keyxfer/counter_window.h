#ifndef GPUTRAVEL_KEYXFER_COUNTER_WINDOW_H_
#define GPUTRAVEL_KEYXFER_COUNTER_WINDOW_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gputravel {

// A range of message counters [first, first + count) on one channel key.
struct CounterWindow {
  uint32_t first = 0;
  uint32_t count = 0;
};

// Hands out non-overlapping counter windows for one channel key and persists
// the high-water mark BEFORE returning a window (P4): after a crash at any
// point, a restarted allocator starts above every window ever handed out,
// whether or not it was used. The state file is written atomically
// (write, fsync, rename, fsync dir). Thread-safe.
class CounterWindowAllocator {
 public:
  // `state_path` holds the high-water mark of key `key_id`; a file for another
  // key id is refused (a new key needs a new file or Reset).
  static absl::StatusOr<CounterWindowAllocator> Open(std::string state_path,
                                                     std::string key_id);

  // Next window of `count` counters; RESOURCE_EXHAUSTED when the 32-bit
  // message counter would overflow (the channel must be re-keyed).
  absl::StatusOr<CounterWindow> Allocate(uint32_t count);

  // The next counter that would be handed out.
  uint64_t high_water_mark() const;

  CounterWindowAllocator(CounterWindowAllocator&& o) noexcept
      : path_(std::move(o.path_)), key_id_(std::move(o.key_id_)), next_(o.next_) {}

 private:
  CounterWindowAllocator(std::string path, std::string key_id, uint64_t next)
      : path_(std::move(path)), key_id_(std::move(key_id)), next_(next) {}
  absl::Status Persist(uint64_t next);

  std::string path_, key_id_;
  mutable absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_);
};

// Writes `contents` to `path` atomically and durably.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_COUNTER_WINDOW_H_
