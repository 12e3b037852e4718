#include "bench/plaintext_source.h"

#include <cstring>
#include <random>

namespace gputravel {
namespace bench {

PlaintextSource::PlaintextSource(size_t size) : data_(size == 0 ? 1 : size, '\0') {
  std::mt19937_64 rng(0x6770757472617631ull);
  size_t i = 0;
  for (; i + 8 <= data_.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&data_[i], &v, 8);
  }
  for (; i < data_.size(); ++i) data_[i] = static_cast<char>(rng());
}

void PlaintextSource::Read(uint64_t offset, uint8_t* dst, size_t n) const {
  const size_t size = data_.size();
  size_t pos = static_cast<size_t>(offset % size);
  while (n > 0) {
    size_t piece = std::min(n, size - pos);
    std::memcpy(dst, data_.data() + pos, piece);
    dst += piece;
    n -= piece;
    pos = 0;
  }
}

ChunkSource PlaintextSource::AsChunkSource() const {
  return [this](uint64_t offset, uint8_t* dst, size_t n) {
    Read(offset, dst, n);
    return absl::OkStatus();
  };
}

}  // namespace bench
}  // namespace gputravel
