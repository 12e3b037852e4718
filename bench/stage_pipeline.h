#ifndef GPUTRAVEL_BENCH_STAGE_PIPELINE_H_
#define GPUTRAVEL_BENCH_STAGE_PIPELINE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "device/bounce_pool.h"
#include "device/h2d_source.h"
#include "device/h2d_writer.h"
#include "keyxfer/cc_channel.h"

namespace gputravel {
namespace bench {

struct StageOptions {
  uint32_t chunk_size = 2u << 20;
  uint32_t slots = 4;  // raised to threads + 1, as H2dWriter does
  int threads = 2;
  std::string bounce_dir = "/dev/shm";
  // As H2dWriterOptions::pool: the ring kept between passes, as the holder
  // agent keeps it between trips; unset, each pass creates and removes one.
  BouncePool* pool = nullptr;
};

struct StageResult {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  double seconds = 0;  // ring lease (creation, when not kept) .. last chunk released
  double mbps = 0;
  double cpu_seconds = 0;  // process CPU time over the same interval
  // Where the time of the workers went (summed over workers, so the encrypt
  // figure can exceed `seconds` with several workers).
  double read_seconds = 0;     // getting the plaintext: a view, or a copy into staging
  double encrypt_seconds = 0;  // EncryptToShared into the bounce slot (private pieces)
  double zeroize_seconds = 0;  // wiping private staging (copying sources only)
  bool zero_copy = false;      // the source lent views
  // SHA-256 over the label and the tags in counter order: equal to what
  // WindowDigest computes, which proves counters and AAD match the writer's.
  std::string digest;
};

// The holder's encrypt-and-stage stage without the device: the same structure
// as H2dWriter::Write's streaming path (workers taking chunk indices in
// counter order, each waiting for its slot of a shared-memory BounceBuffer
// ring, getting the plaintext as a view or a copy into private staging and
// encrypting with its own ChannelCipher straight into the slot; the worker
// that finds nobody ringing hands every ready chunk over in counter order),
// except that a chunk is acknowledged at once instead of by the device: its
// tag goes into the digest and its slot is freed when it is handed over.
// Chunk i uses counter first_counter + i and the writer's AAD.
absl::StatusOr<StageResult> RunEncryptAndStage(const ChannelMaterial& key,
                                               uint64_t session_id,
                                               uint64_t buffer_id,
                                               uint64_t length,
                                               uint32_t first_counter,
                                               H2dSource& source,
                                               const StageOptions& options);
// The same over a copying callback (the writer's fallback path).
absl::StatusOr<StageResult> RunEncryptAndStage(const ChannelMaterial& key,
                                               uint64_t session_id,
                                               uint64_t buffer_id,
                                               uint64_t length,
                                               uint32_t first_counter,
                                               const ChunkSource& source,
                                               const StageOptions& options);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_STAGE_PIPELINE_H_
