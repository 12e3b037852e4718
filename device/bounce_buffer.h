#ifndef GPUTRAVEL_DEVICE_BOUNCE_BUFFER_H_
#define GPUTRAVEL_DEVICE_BOUNCE_BUFFER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "device/truncation_guard.h"

namespace gputravel {

// Shared-memory bounce buffers: a file in a tmpfs (/dev/shm), mapped by the
// holder (read/write) and the device (read-only): `slots` x `slot_size` bytes
// of ciphertext, then a tag area of one 16-byte authentication tag per slot
// (the driver's unprotected auth-tag buffer: the copy engine is given a tag's
// address, 16-byte aligned, never the tag itself). They stand for the
// driver's unprotected sysmem bounce buffers: only ciphertext and tags are
// ever staged here, because the host can read and write them.
class BounceBuffer {
 public:
  // Creates a new file (O_EXCL, mode 0600) and maps it read/write.
  static absl::StatusOr<std::unique_ptr<BounceBuffer>> Create(
      const std::string& path, uint32_t slots, uint32_t slot_size);
  // Maps an existing file read-only (device side), checking its size. The
  // file must lie directly in the directory `dir_fd` is open on, whose
  // configured path is `dir` (the shared memory of the TD the device is
  // routed to): `path` is `dir`/NAME, one component, opened relative to
  // `dir_fd` (so replacing the directory's path later changes nothing)
  // without following a link, and must be a regular file.
  static absl::StatusOr<std::unique_ptr<BounceBuffer>> OpenReadOnly(
      int dir_fd, const std::string& dir, const std::string& path, uint32_t slots,
      uint32_t slot_size);
  ~BounceBuffer();
  BounceBuffer(const BounceBuffer&) = delete;
  BounceBuffer& operator=(const BounceBuffer&) = delete;

  static constexpr size_t kTagBytes = 16;
  // The file's size for a geometry: the slots, then the tag area.
  static size_t FileBytes(uint32_t slots, uint32_t slot_size) {
    return size_t{slots} * slot_size + size_t{slots} * kTagBytes;
  }

  uint8_t* slot(uint32_t i) { return base_ + size_t{i} * slot_size_; }
  const uint8_t* slot(uint32_t i) const { return base_ + size_t{i} * slot_size_; }
  // Slot i's place in the tag area, and its offset from the start of the
  // file (what a doorbell names).
  uint64_t tag_offset(uint32_t i) const {
    return uint64_t{slots_} * slot_size_ + uint64_t{i} * kTagBytes;
  }
  uint8_t* tag(uint32_t i) { return base_ + tag_offset(i); }
  // Bytes [offset, +n) of the file (device side: the tag a doorbell names);
  // null when they are not all inside the file.
  const uint8_t* bytes_at(uint64_t offset, size_t n) const {
    return offset <= length_ && n <= length_ - offset ? base_ + offset : nullptr;
  }
  size_t length() const { return length_; }
  // Device side: guards this thread's reads of the mapping while the result
  // lives (truncation_guard.h); faulted() is then true once a read found the
  // file shorter than when it was mapped (its owner truncated it): what was
  // read there reads as zeros and must not be used.
  TruncationGuard::Scope GuardReads() {
    return TruncationGuard::Scope(base_, length_, &faulted_);
  }
  bool faulted() const { return faulted_.load(std::memory_order_relaxed); }
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
  std::atomic<bool> faulted_{false};
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_BOUNCE_BUFFER_H_
