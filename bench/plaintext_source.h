#ifndef GPUTRAVEL_BENCH_PLAINTEXT_SOURCE_H_
#define GPUTRAVEL_BENCH_PLAINTEXT_SOURCE_H_

#include <cstdint>
#include <string>

#include "device/h2d_source.h"

namespace gputravel {
namespace bench {

// A holder's dataset held in memory (as a page-cached file would be): `size`
// bytes of pseudo-random data, read cyclically so a window of any length can
// be served from a bounded buffer. It lends views in place (the writer's
// zero-copy path, as the holder's mapped dataset), so the figures measure the
// pipeline and not the disk; Read (plain memcpy) serves the copying fallback.
// To lend a view that wraps around the end, the first `max_view` bytes are
// repeated after the last one.
class PlaintextSource final : public H2dSource {
 public:
  explicit PlaintextSource(size_t size, size_t max_view = 4u << 20);

  bool CanView() const override { return true; }
  // Bytes [offset, offset + n) of the (cyclic) dataset, in place; n must not
  // exceed max_view.
  absl::StatusOr<PlaintextView> View(uint64_t offset, size_t n) override;
  // The same, copied.
  absl::Status Read(uint64_t offset, uint8_t* dst, size_t n) override;

  // A copying-only source over this one (the writer's fallback path).
  ChunkSource AsChunkSource() const;
  // The first `n` bytes (n <= size()), for checks against a digest.
  std::string Prefix(size_t n) const { return data_.substr(0, n); }
  size_t size() const { return size_; }

 private:
  void Copy(uint64_t offset, uint8_t* dst, size_t n) const;

  size_t size_;
  size_t max_view_;
  std::string data_;  // size_ bytes, then the first max_view_ bytes again
};

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_PLAINTEXT_SOURCE_H_
