#include "bench/stage_bench.h"

#include <chrono>

#include "bench/stats.h"
#include "keyxfer/counter_window.h"

namespace gputravel {
namespace bench {

absl::StatusOr<StageResult> RunEncryptAndStage(SlotFreeingDevice& device,
                                               const ChannelMaterial& key,
                                               uint64_t session_id, uint64_t buffer_id,
                                               uint64_t length, uint32_t first_counter,
                                               H2dSource& source,
                                               const H2dWriterOptions& options) {
  H2dWriter writer(device.channel(), options);
  const CounterWindow window{first_counter, H2dWriter::ChunksFor(length, options.chunk_size)};
  device.ExpectCounter(first_counter);
  const uint64_t chunks0 = device.chunks(), bytes0 = device.bytes();
  auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  auto stats = writer.Write(key, session_id, buffer_id, 0, length, window, source);
  const double seconds = SecondsSince(t0);
  const double cpu_seconds = ProcessCpuSeconds() - cpu0;
  if (!stats.ok()) return stats.status();
  if (device.chunks() - chunks0 != window.count || device.bytes() - bytes0 != length) {
    return absl::InternalError(
        "the device stand-in answered " + std::to_string(device.chunks() - chunks0) +
        " doorbells for " + std::to_string(device.bytes() - bytes0) + " bytes; the writer sent " +
        std::to_string(window.count) + " chunks of " + std::to_string(length) + " bytes");
  }
  StageResult r;
  r.bytes = stats->bytes;
  r.chunks = stats->chunks;
  r.seconds = seconds;
  r.mbps = MegabytesPerSecond(length, seconds);
  r.cpu_seconds = cpu_seconds;
  r.read_seconds = stats->read_seconds;
  r.zero_copy = stats->zero_copy;
  r.digest = stats->digest;
  return r;
}

absl::StatusOr<StageResult> RunEncryptAndStage(SlotFreeingDevice& device,
                                               const ChannelMaterial& key,
                                               uint64_t session_id, uint64_t buffer_id,
                                               uint64_t length, uint32_t first_counter,
                                               const ChunkSource& source,
                                               const H2dWriterOptions& options) {
  CopyingSource copying(source);
  return RunEncryptAndStage(device, key, session_id, buffer_id, length, first_counter, copying,
                            options);
}

}  // namespace bench
}  // namespace gputravel
