#include "orchestrator/gpu_health.h"

#include <utility>

namespace gputravel {

void GpuHealthBoard::Record(const std::string& gpu, const absl::Status& outcome,
                            GpuHealth seen) {
  absl::MutexLock l(&mu_);
  GpuHealth& h = gpus_[gpu];
  if (seen.serial.empty()) seen.serial = h.serial;
  if (seen.memory_bytes == 0) seen.memory_bytes = h.memory_bytes;
  seen.reach = outcome.ok() ? GpuHealth::Reach::kReachable : GpuHealth::Reach::kUnreachable;
  seen.error = outcome.ok() ? "" : std::string(outcome.message());
  seen.checked = absl::Now();
  h = std::move(seen);
}

GpuHealth GpuHealthBoard::Get(const std::string& gpu) const {
  absl::MutexLock l(&mu_);
  auto it = gpus_.find(gpu);
  return it == gpus_.end() ? GpuHealth() : it->second;
}

absl::Status GpuHealthBoard::CheckBufferFits(const std::string& gpu,
                                             uint64_t buffer_bytes) const {
  const GpuHealth h = Get(gpu);
  if (h.memory_bytes == 0 || buffer_bytes <= h.memory_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "buffer_bytes: " + std::to_string(buffer_bytes) + " bytes do not fit on GPU '" + gpu +
      "': its device (" + h.serial + ") has " + std::to_string(h.memory_bytes) +
      " bytes of memory; choose a smaller buffer_bytes");
}

}  // namespace gputravel
