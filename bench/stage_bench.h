#ifndef GPUTRAVEL_BENCH_STAGE_BENCH_H_
#define GPUTRAVEL_BENCH_STAGE_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/slot_freeing_device.h"
#include "device/h2d_source.h"
#include "device/h2d_writer.h"
#include "keyxfer/cc_channel.h"

namespace gputravel {
namespace bench {

struct StageResult {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  double seconds = 0;      // the whole Write call
  double mbps = 0;
  double cpu_seconds = 0;  // process CPU time over the same interval
  // The writer's time getting the plaintext (views or copies into staging),
  // summed over its workers.
  double read_seconds = 0;
  bool zero_copy = false;  // the source lent views
  std::string digest;      // the writer's window digest
};

// (a) the holder's encrypt-and-stage: the real H2dWriter writes `length`
// bytes of `source` (chunk i under counter first_counter + i) into its bounce
// ring, with `device` standing in for the GPU: it frees each chunk's slot as
// soon as its doorbell arrives, so the figure is the writer's alone. Checks
// that the stand-in answered every chunk.
absl::StatusOr<StageResult> RunEncryptAndStage(SlotFreeingDevice& device,
                                               const ChannelMaterial& key,
                                               uint64_t session_id, uint64_t buffer_id,
                                               uint64_t length, uint32_t first_counter,
                                               H2dSource& source,
                                               const H2dWriterOptions& options);
// The same over a copying callback (the writer's fallback path).
absl::StatusOr<StageResult> RunEncryptAndStage(SlotFreeingDevice& device,
                                               const ChannelMaterial& key,
                                               uint64_t session_id, uint64_t buffer_id,
                                               uint64_t length, uint32_t first_counter,
                                               const ChunkSource& source,
                                               const H2dWriterOptions& options);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_STAGE_BENCH_H_
