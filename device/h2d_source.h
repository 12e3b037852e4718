#ifndef GPUTRAVEL_DEVICE_H2D_SOURCE_H_
#define GPUTRAVEL_DEVICE_H2D_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gputravel {

// A read-only view of plaintext lent by a source: `size` bytes at `data`,
// valid until the view is destroyed or reset, which runs the source's release
// hook exactly once (an munmap, a reference drop, ...). Move-only.
class PlaintextView {
 public:
  PlaintextView() = default;
  PlaintextView(const uint8_t* data, size_t size, std::function<void()> release)
      : data_(data), size_(size), release_(std::move(release)) {}
  ~PlaintextView() { Reset(); }
  PlaintextView(PlaintextView&& other) noexcept { *this = std::move(other); }
  PlaintextView& operator=(PlaintextView&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = other.data_;
      size_ = other.size_;
      release_ = std::move(other.release_);
      other.data_ = nullptr;
      other.size_ = 0;
      other.release_ = nullptr;
    }
    return *this;
  }
  PlaintextView(const PlaintextView&) = delete;
  PlaintextView& operator=(const PlaintextView&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // Gives the view back to its source; data() is invalid afterwards.
  void Reset() {
    if (release_) {
      auto release = std::move(release_);
      release_ = nullptr;
      release();
    }
    data_ = nullptr;
    size_ = 0;
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::function<void()> release_;
};

// Where the holder's copy-engine writer takes plaintext from. Two ways:
//  - View: the source lends [offset, offset + n) in place (an mmap of the
//    dataset file, an in-memory buffer). The writer encrypts straight from
//    the view into the bounce slot and releases it: no copy, no staging, and
//    no reader thread.
//  - Read: the source copies [offset, offset + n) into the writer's private
//    staging (zeroized when the write ends). The fallback for sources that
//    cannot lend memory.
// Offsets are relative to the start of the window being written. Both
// methods are called concurrently from the writer's worker threads, for
// chunks in about (not exactly) increasing order, and must be thread-safe.
class H2dSource {
 public:
  virtual ~H2dSource() = default;

  // True when View works; the writer then never calls Read.
  virtual bool CanView() const { return false; }

  // A view of [offset, offset + n), valid until the view is released.
  virtual absl::StatusOr<PlaintextView> View(uint64_t offset, size_t n) {
    (void)offset;
    (void)n;
    return absl::UnimplementedError("this plaintext source cannot lend views; use Read");
  }

  // Copies [offset, offset + n) into `dst`.
  virtual absl::Status Read(uint64_t offset, uint8_t* dst, size_t n) = 0;
};

// Reads plaintext [offset, offset + n) of the source into `dst`.
using ChunkSource = std::function<absl::Status(uint64_t offset, uint8_t* dst, size_t n)>;

// The copying fallback over a plain callback (tests, the benchmark's small
// steps, sources that only know how to copy). `fn` must be thread-safe.
class CopyingSource final : public H2dSource {
 public:
  explicit CopyingSource(ChunkSource fn) : fn_(std::move(fn)) {}
  absl::Status Read(uint64_t offset, uint8_t* dst, size_t n) override {
    return fn_(offset, dst, n);
  }

 private:
  ChunkSource fn_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_H2D_SOURCE_H_
