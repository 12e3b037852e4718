#ifndef GPUTRAVEL_BENCH_PROVISION_BENCH_H_
#define GPUTRAVEL_BENCH_PROVISION_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/device_rig.h"
#include "device/h2d_source.h"
#include "device/h2d_writer.h"

namespace gputravel {
namespace bench {

struct ProvisionResult {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  double seconds = 0;       // H2dWriter::Write, as the caller sees it
  double mbps = 0;
  // Process CPU time over the write: holder threads, gRPC, and the device's
  // decryption (all in this process).
  double cpu_seconds = 0;
  double read_seconds = 0;  // writer's own figure: time in the source callback
};

// One window through the real holder path: H2dWriter (encrypt workers
// reading the source's views, or copies for a copying source, bounce ring in
// options.bounce_dir, doorbells in counter order on one SubmitH2DStream over
// gRPC) into the rig's EmulatedGpu, which decrypts each chunk at its own
// counter into device buffer `buffer_id` from offset 0. The session is
// re-keyed and LCE0 granted the window before, and the device's chunk count
// checked after (untimed);
// the holder reuses the rig's connected channel, so connection setup is not
// timed.
absl::StatusOr<ProvisionResult> MeasureProvision(DeviceRig& rig, uint64_t buffer_id,
                                                 uint64_t length, H2dSource& source,
                                                 const H2dWriterOptions& options);
// The same through `engines` copy engines side by side, as a hand-off of
// that many lanes (keyxfer/handoff_lanes.h) writes: each engine's key, its
// lane of the window, and the device granted each lane first (untimed).
absl::StatusOr<ProvisionResult> MeasureProvisionLanes(DeviceRig& rig, uint64_t buffer_id,
                                                      uint64_t length, H2dSource& source,
                                                      const H2dWriterOptions& options,
                                                      uint32_t engines);
// The same over a copying callback (the writer's fallback path).
absl::StatusOr<ProvisionResult> MeasureProvision(DeviceRig& rig, uint64_t buffer_id,
                                                 uint64_t length,
                                                 const ChunkSource& source,
                                                 const H2dWriterOptions& options);

// The device's own ceiling: EmulatedGpu::SubmitH2D called directly (no
// gRPC, no holder threads) on chunks of `chunk_size` staged one at a time in a
// one-slot ring in `bounce_dir`; only the SubmitH2D calls are timed (decrypt
// at the device's counter outside the device lock, tag check, then the chunk
// put in device memory: a 2 MiB chunk at a page boundary by exchanging the
// copy engine's spare page for the old one, a smaller chunk by a copy from
// scratch). `bytes` in all, into device buffer `buffer_id`.
struct DeviceCeiling {
  uint32_t chunk_size = 0;
  uint64_t bytes = 0;
  double seconds = 0;  // sum of the SubmitH2D calls
  double mbps = 0;
  double per_chunk_us = 0;
};
absl::StatusOr<DeviceCeiling> MeasureDeviceCeiling(DeviceRig& rig, uint64_t buffer_id,
                                                   uint64_t bytes, uint32_t chunk_size,
                                                   const ChunkSource& source,
                                                   const std::string& bounce_dir);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_PROVISION_BENCH_H_
