#ifndef GPUTRAVEL_DEVICE_DEVICE_MEMORY_H_
#define GPUTRAVEL_DEVICE_DEVICE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gputravel {

// The emulated GPU's memory is kept in pages of this size: the size of a
// bounce slot and of the provisioning pipeline's default chunk, so that a
// chunk the copy engine decrypts usually covers exactly one page.
inline constexpr size_t kDevicePageBytes = size_t{2} << 20;

// One block of device memory: zero-filled when made, zeroized (not merely
// freed) when it dies, so no plaintext outlives it in the process's heap.
class DevicePage {
 public:
  explicit DevicePage(size_t bytes);
  ~DevicePage();
  DevicePage(DevicePage&& other) noexcept;
  DevicePage& operator=(DevicePage&& other) noexcept;
  DevicePage(const DevicePage&) = delete;
  DevicePage& operator=(const DevicePage&) = delete;

  uint8_t* data() { return bytes_.get(); }
  const uint8_t* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  // Zeroizes the whole page (OPENSSL_cleanse).
  void Wipe();

 private:
  std::unique_ptr<uint8_t[]> bytes_;
  size_t size_ = 0;
};

// One device buffer: `size` bytes, really stored and really zeroed, held as
// kDevicePageBytes pages (the last one may be shorter).
//
// Why pages: the copy engine must not change device memory before a chunk's
// tag checks, so it decrypts into memory of its own first. With a flat
// buffer it then copies the chunk in (a third pass over every byte after the
// holder's encryption and its own decryption). A chunk that covers one whole
// page is instead decrypted into a spare page that takes the old page's
// place once the tag checks (Exchange): no copy, and the old page becomes
// the spare.
//
// Offsets and lengths are checked by the caller (in range, as the device's
// rules require); the methods assume they are.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(uint64_t size);

  uint64_t size() const { return size_; }

  // Sets every byte to zero (a scrub: the buffer stays allocated).
  void Zero();
  // Zeroizes every byte with OPENSSL_cleanse (a reset or heartbeat miss).
  void Wipe();

  // Copies `n` bytes from `src` to [offset, offset + n).
  void Write(uint64_t offset, const uint8_t* src, size_t n);
  // Appends the bytes of [offset, offset + n) to `out`.
  void AppendTo(uint64_t offset, size_t n, std::string* out) const;

  // True if [offset, offset + n) is exactly one full kDevicePageBytes page.
  bool IsWholePage(uint64_t offset, size_t n) const;
  // Puts `page` (kDevicePageBytes) in the place of the whole page at
  // `offset` and returns the page it replaced, whose bytes are unchanged.
  DevicePage Exchange(uint64_t offset, DevicePage page);

 private:
  uint64_t size_;
  std::vector<DevicePage> pages_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_DEVICE_MEMORY_H_
