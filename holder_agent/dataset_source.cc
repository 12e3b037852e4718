#include "holder_agent/dataset_source.h"

#include <memory>

namespace gputravel {

DatasetSource::DatasetSource(const Dataset& dataset, uint64_t window_offset,
                             uint64_t window_length, std::function<bool(uint64_t)> progress)
    : dataset_(dataset),
      base_(window_offset),
      length_(window_length),
      progress_(std::move(progress)) {}

absl::Status DatasetSource::CheckRange(uint64_t offset, size_t n) const {
  if (progress_ && !progress_(0)) {
    return absl::CancelledError("the orchestrator cancelled provisioning");
  }
  if (offset > length_ || n > length_ - offset) {
    return absl::OutOfRangeError("chunk [" + std::to_string(offset) + ", +" +
                                 std::to_string(n) + ") is outside the window of " +
                                 std::to_string(length_) + " bytes");
  }
  return absl::OkStatus();
}

absl::StatusOr<PlaintextView> DatasetSource::View(uint64_t offset, size_t n) {
  absl::Status s = CheckRange(offset, n);
  if (!s.ok()) return s;
  auto m = dataset_.Map(base_ + offset, n);
  if (!m.ok()) return m.status();
  // The view owns the mapping; releasing it unmaps the chunk.
  auto held = std::make_shared<DatasetMapping>(std::move(*m));
  const uint8_t* data = held->data();
  if (progress_) progress_(n);
  return PlaintextView(data, n, [held]() mutable { held.reset(); });
}

absl::Status DatasetSource::Read(uint64_t offset, uint8_t* dst, size_t n) {
  absl::Status s = CheckRange(offset, n);
  if (!s.ok()) return s;
  s = dataset_.Read(base_ + offset, dst, n);
  if (s.ok() && progress_) progress_(n);
  return s;
}

}  // namespace gputravel
