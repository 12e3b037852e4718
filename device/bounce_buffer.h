#ifndef GPUTRAVEL_DEVICE_BOUNCE_BUFFER_H_
#define GPUTRAVEL_DEVICE_BOUNCE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gputravel {

// Shared-memory bounce buffers: a file of `slots` x `slot_size` bytes in a
// tmpfs (/dev/shm), mapped by the holder (read/write) and the device
// (read-only). They stand for the driver's unprotected sysmem bounce buffers:
// only ciphertext is ever staged here, because the host can read them.
class BounceBuffer {
 public:
  // Creates a new file (O_EXCL, mode 0600) and maps it read/write.
  static absl::StatusOr<std::unique_ptr<BounceBuffer>> Create(
      const std::string& path, uint32_t slots, uint32_t slot_size);
  // Maps an existing file read-only (device side), checking its size. The
  // file must lie directly in `dir` (the shared memory of the TD the device is
  // routed to: `path` is `dir`/NAME, one component, opened relative to `dir`
  // without following a link) and be a regular file.
  static absl::StatusOr<std::unique_ptr<BounceBuffer>> OpenReadOnly(
      const std::string& dir, const std::string& path, uint32_t slots,
      uint32_t slot_size);
  ~BounceBuffer();

  uint8_t* slot(uint32_t i) { return base_ + size_t{i} * slot_size_; }
  const uint8_t* slot(uint32_t i) const { return base_ + size_t{i} * slot_size_; }
  uint32_t slots() const { return slots_; }
  uint32_t slot_size() const { return slot_size_; }
  const std::string& path() const { return path_; }

  // Removes the file (creator only; the mapping stays valid until destroyed).
  void Unlink();

 private:
  BounceBuffer() = default;
  std::string path_;
  uint8_t* base_ = nullptr;
  size_t length_ = 0;
  uint32_t slots_ = 0, slot_size_ = 0;
  bool owner_ = false;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_BOUNCE_BUFFER_H_
