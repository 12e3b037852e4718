#ifndef GPUTRAVEL_HOLDER_AGENT_DATASET_SOURCE_H_
#define GPUTRAVEL_HOLDER_AGENT_DATASET_SOURCE_H_

#include <cstdint>
#include <functional>

#include "device/h2d_source.h"
#include "holder_agent/dataset.h"

namespace gputravel {

// One window of a holder's dataset as the copy-engine writer's plaintext
// source. Chunks are mapped from the file in place and lent to the writer,
// which encrypts straight from the mapping into the bounce slot and then
// unmaps it: no copy of the plaintext is made, and the resident set holds at
// most one mapped chunk per worker (streaming). Where the file cannot be
// mapped, chunks are copied with pread into the writer's private staging.
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

 private:
  absl::Status CheckRange(uint64_t offset, size_t n) const;

  const Dataset& dataset_;
  const uint64_t base_, length_;
  const std::function<bool(uint64_t)> progress_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_DATASET_SOURCE_H_
