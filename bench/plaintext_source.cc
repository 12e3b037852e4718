#include "bench/plaintext_source.h"

#include <cstring>
#include <random>

namespace gputravel {
namespace bench {

PlaintextSource::PlaintextSource(size_t size, size_t max_view)
    : size_(size == 0 ? 1 : size), max_view_(max_view) {
  std::string pattern(size_, '\0');
  std::mt19937_64 rng(0x6770757472617631ull);
  size_t i = 0;
  for (; i + 8 <= pattern.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&pattern[i], &v, 8);
  }
  for (; i < pattern.size(); ++i) pattern[i] = static_cast<char>(rng());
  data_.reserve(size_ + max_view_);
  data_ = pattern;
  while (data_.size() < size_ + max_view_) {
    data_.append(pattern, 0, std::min(pattern.size(), size_ + max_view_ - data_.size()));
  }
}

absl::StatusOr<PlaintextView> PlaintextSource::View(uint64_t offset, size_t n) {
  if (n > max_view_) {
    return absl::InvalidArgumentError("in-memory source lends at most " +
                                      std::to_string(max_view_) + " bytes per view, " +
                                      std::to_string(n) + " asked");
  }
  const size_t pos = static_cast<size_t>(offset % size_);
  return PlaintextView(reinterpret_cast<const uint8_t*>(data_.data()) + pos, n, nullptr);
}

absl::Status PlaintextSource::Read(uint64_t offset, uint8_t* dst, size_t n) {
  Copy(offset, dst, n);
  return absl::OkStatus();
}

void PlaintextSource::Copy(uint64_t offset, uint8_t* dst, size_t n) const {
  size_t pos = static_cast<size_t>(offset % size_);
  while (n > 0) {
    size_t piece = std::min(n, size_ - pos);
    std::memcpy(dst, data_.data() + pos, piece);
    dst += piece;
    n -= piece;
    pos = 0;
  }
}

ChunkSource PlaintextSource::AsChunkSource() const {
  return [this](uint64_t offset, uint8_t* dst, size_t n) {
    Copy(offset, dst, n);
    return absl::OkStatus();
  };
}

}  // namespace bench
}  // namespace gputravel
