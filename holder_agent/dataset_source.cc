#include "holder_agent/dataset_source.h"

#include <algorithm>
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

absl::StatusOr<std::shared_ptr<DatasetMapping>> DatasetSource::Region(uint64_t index) {
  // Looks the region up among the kept ones, making it the one used last.
  auto find = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::shared_ptr<DatasetMapping> {
    for (int k = 0; k < 2; ++k) {
      if (kept_[k].mapping != nullptr && kept_[k].index == index) {
        if (k == 1) std::swap(kept_[0], kept_[1]);
        return kept_[0].mapping;
      }
    }
    return nullptr;
  };
  {
    absl::MutexLock l(&mu_);
    if (auto r = find()) return r;
  }
  // Mapped without the lock: the other workers keep taking views meanwhile.
  const uint64_t start = index * kRegionBytes;
  auto m = dataset_.Map(base_ + start, std::min<uint64_t>(kRegionBytes, length_ - start));
  if (!m.ok()) return m.status();
  ++mappings_;
  auto region = std::make_shared<DatasetMapping>(std::move(*m));
  // Unmapped (when no view holds it any more) after the lock is released:
  // tearing down 8 MiB of page tables must not hold the other workers up.
  std::shared_ptr<DatasetMapping> dropped;
  {
    absl::MutexLock l(&mu_);
    if (auto r = find()) return r;  // mapped by another worker meanwhile (ours goes)
    // The older kept region lives on only in its views.
    dropped = std::move(kept_[1].mapping);
    kept_[1] = std::move(kept_[0]);
    kept_[0] = Kept{index, region};
  }
  return region;
}

absl::StatusOr<PlaintextView> DatasetSource::View(uint64_t offset, size_t n) {
  auto v = ViewUnrecorded(offset, n);
  if (!v.ok()) failed_ = true;
  return v;
}

absl::Status DatasetSource::Read(uint64_t offset, uint8_t* dst, size_t n) {
  absl::Status s = ReadUnrecorded(offset, dst, n);
  if (!s.ok()) failed_ = true;
  return s;
}

absl::StatusOr<PlaintextView> DatasetSource::ViewUnrecorded(uint64_t offset, size_t n) {
  absl::Status s = CheckRange(offset, n);
  if (!s.ok()) return s;
  if (n > 0 && n <= kRegionChunkMax && offset / kRegionBytes == (offset + n - 1) / kRegionBytes) {
    const uint64_t index = offset / kRegionBytes;
    auto region = Region(index);
    if (!region.ok()) return region.status();
    const uint8_t* data = (*region)->data() + (offset - index * kRegionBytes);
    if (progress_) progress_(n);
    // The view keeps its region mapped; the last one to go unmaps it.
    return PlaintextView(data, n, [held = std::move(*region)]() mutable { held.reset(); });
  }
  auto m = dataset_.Map(base_ + offset, n);
  if (!m.ok()) return m.status();
  ++mappings_;
  // The view owns the mapping; releasing it unmaps the chunk.
  auto held = std::make_shared<DatasetMapping>(std::move(*m));
  const uint8_t* data = held->data();
  if (progress_) progress_(n);
  return PlaintextView(data, n, [held]() mutable { held.reset(); });
}

absl::Status DatasetSource::ReadUnrecorded(uint64_t offset, uint8_t* dst, size_t n) {
  absl::Status s = CheckRange(offset, n);
  if (!s.ok()) return s;
  s = dataset_.Read(base_ + offset, dst, n);
  if (s.ok() && progress_) progress_(n);
  return s;
}

}  // namespace gputravel
