#ifndef GPUTRAVEL_BENCH_PLAINTEXT_SOURCE_H_
#define GPUTRAVEL_BENCH_PLAINTEXT_SOURCE_H_

#include <cstdint>
#include <string>

#include "device/h2d_writer.h"

namespace gputravel {
namespace bench {

// A holder's dataset held in memory (as a page-cached file would be): `size`
// bytes of pseudo-random data, read cyclically so a window of any length can
// be served from a bounded buffer. Reads are plain memcpy, the cheapest
// source there is, so the figures measure the pipeline and not the disk.
class PlaintextSource {
 public:
  explicit PlaintextSource(size_t size);

  // Bytes [offset, offset + n) of the (cyclic) dataset.
  void Read(uint64_t offset, uint8_t* dst, size_t n) const;
  // The same, as the writer's source callback. The object must outlive it.
  ChunkSource AsChunkSource() const;
  // The first `n` bytes (n <= size()), for checks against a digest.
  std::string Prefix(size_t n) const { return data_.substr(0, n); }
  size_t size() const { return data_.size(); }

 private:
  std::string data_;
};

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_PLAINTEXT_SOURCE_H_
