#ifndef GPUTRAVEL_HOLDER_AGENT_DATASET_SOURCE_H_
#define GPUTRAVEL_HOLDER_AGENT_DATASET_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "device/h2d_source.h"
#include "holder_agent/dataset.h"

namespace gputravel {

// One window of a holder's dataset as the copy-engine writer's plaintext
// source. Chunks are mapped from the file in place and lent to the writer,
// which encrypts straight from the mapping into the bounce slot and then
// releases the view: no copy of the plaintext is made, and the resident set
// holds only what is mapped for the chunks in flight (streaming). A chunk
// over 256 KiB is mapped on its own and unmapped when released. A smaller
// one is a view into the mapping of the 8 MiB region of the window it lies
// in, so that a region costs one map and one unmap instead of one per
// chunk: the source keeps the two regions used last (workers at a region's
// edge need both), and each view keeps its own region until it is released
// (the writer takes chunks in order, so at most a few regions are mapped at
// once). Where the file cannot be mapped, chunks are copied with pread into
// the writer's private staging.
class DatasetSource final : public H2dSource {
 public:
  // Window [window_offset, window_offset + window_length) of `dataset`, which
  // must outlive the source. `progress(bytes)` hears of every chunk handed to
  // the writer (0 first, to ask whether to go on); once it returns false the
  // source refuses further chunks with CANCELLED. It may be called from
  // several threads at once.
  DatasetSource(const Dataset& dataset, uint64_t window_offset, uint64_t window_length,
                std::function<bool(uint64_t)> progress = nullptr);

  bool CanView() const override { return dataset_.mappable(); }
  absl::StatusOr<PlaintextView> View(uint64_t offset, size_t n) override;
  absl::Status Read(uint64_t offset, uint8_t* dst, size_t n) override;

  // Whether a View or Read failed (the dataset, or the caller's cancel):
  // a write that failed while this is false failed on the device path (the
  // GPU's answers, or the way to it), not on the holder's own side.
  bool failed() const { return failed_.load(); }

  // Mappings made so far (regions and single chunks): tests and diagnostics.
  uint64_t mappings() const { return mappings_.load(); }

 private:
  absl::Status CheckRange(uint64_t offset, size_t n) const;
  absl::StatusOr<PlaintextView> ViewUnrecorded(uint64_t offset, size_t n);
  absl::Status ReadUnrecorded(uint64_t offset, uint8_t* dst, size_t n);
  std::atomic<bool> failed_{false};

  static constexpr uint64_t kRegionBytes = 8u << 20;
  static constexpr size_t kRegionChunkMax = 256u << 10;
  // The window's region `index` (bytes [index x kRegionBytes, +kRegionBytes)
  // of the window): the one kept when it is that one, else mapped now.
  absl::StatusOr<std::shared_ptr<DatasetMapping>> Region(uint64_t index);

  const Dataset& dataset_;
  const uint64_t base_, length_;
  const std::function<bool(uint64_t)> progress_;
  struct Kept {
    uint64_t index = 0;
    std::shared_ptr<DatasetMapping> mapping;  // null: none
  };
  absl::Mutex mu_;
  Kept kept_[2] ABSL_GUARDED_BY(mu_);  // kept_[0]: the one used last
  std::atomic<uint64_t> mappings_{0};
};

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_DATASET_SOURCE_H_
