#include "device/device_memory.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "keyxfer/secret_bytes.h"

namespace gputravel {

DevicePage::DevicePage(size_t bytes) : bytes_(new uint8_t[bytes]()), size_(bytes) {}

DevicePage::~DevicePage() { Wipe(); }

DevicePage::DevicePage(DevicePage&& other) noexcept
    : bytes_(std::move(other.bytes_)), size_(std::exchange(other.size_, 0)) {}

DevicePage& DevicePage::operator=(DevicePage&& other) noexcept {
  if (this != &other) {
    Wipe();
    bytes_ = std::move(other.bytes_);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void DevicePage::Wipe() {
  if (bytes_ != nullptr) Zeroize(bytes_.get(), size_);
}

DeviceBuffer::DeviceBuffer(uint64_t size) : size_(size) {
  pages_.reserve((size + kDevicePageBytes - 1) / kDevicePageBytes);
  for (uint64_t off = 0; off < size; off += kDevicePageBytes) {
    pages_.emplace_back(static_cast<size_t>(std::min<uint64_t>(kDevicePageBytes, size - off)));
  }
}

void DeviceBuffer::Zero() {
  for (DevicePage& p : pages_) std::memset(p.data(), 0, p.size());
}

void DeviceBuffer::Wipe() {
  for (DevicePage& p : pages_) p.Wipe();
}

void DeviceBuffer::Write(uint64_t offset, const uint8_t* src, size_t n) {
  while (n > 0) {
    DevicePage& p = pages_[offset / kDevicePageBytes];
    const size_t at = offset % kDevicePageBytes;
    const size_t k = std::min(n, p.size() - at);
    std::memcpy(p.data() + at, src, k);
    src += k;
    offset += k;
    n -= k;
  }
}

void DeviceBuffer::AppendTo(uint64_t offset, size_t n, std::string* out) const {
  out->reserve(out->size() + n);
  while (n > 0) {
    const DevicePage& p = pages_[offset / kDevicePageBytes];
    const size_t at = offset % kDevicePageBytes;
    const size_t k = std::min(n, p.size() - at);
    out->append(reinterpret_cast<const char*>(p.data()) + at, k);
    offset += k;
    n -= k;
  }
}

bool DeviceBuffer::IsWholePage(uint64_t offset, size_t n) const {
  if (offset % kDevicePageBytes != 0 || n != kDevicePageBytes) return false;
  const uint64_t i = offset / kDevicePageBytes;
  return i < pages_.size() && pages_[i].size() == kDevicePageBytes;
}

DevicePage DeviceBuffer::Exchange(uint64_t offset, DevicePage page) {
  DevicePage& slot = pages_[offset / kDevicePageBytes];
  DevicePage old = std::move(slot);
  slot = std::move(page);
  return old;
}

}  // namespace gputravel
