#ifndef GPUTRAVEL_DEVICE_H2D_WRITER_H_
#define GPUTRAVEL_DEVICE_H2D_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "device/bounce_pool.h"
#include "device/h2d_lane.h"
#include "device/h2d_source.h"
#include "keyxfer/cc_channel.h"
#include "keyxfer/counter_window.h"
#include "grpcpp/grpcpp.h"
#include "proto/device.grpc.pb.h"

namespace gputravel {

struct H2dCancelPoint;  // where Cancel() reaches the call in progress

// The most encryption workers a write uses: more only contend for the same
// cores and ring (and the ring, one slot per worker plus one, has at most 64
// slots).
inline constexpr int kMaxWriterThreads = 32;

struct H2dWriterOptions {
  uint32_t chunk_size = 2u << 20;   // plaintext bytes per chunk (= slot size)
  uint32_t slots = 4;               // bounce ring depth (raised to threads + 1)
  int threads = 2;                  // parallel encryption workers (at most chunks and
                                    // kMaxWriterThreads)
  std::string bounce_dir = "/dev/shm";
  // Where the bounce ring comes from. Set (the holder agent's), the ring is
  // kept between writes; unset, each write creates a ring in `bounce_dir` and
  // removes it at the end. Not owned; must outlive the writer.
  BouncePool* pool = nullptr;
};

struct H2dWriteStats {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  // SHA-256("gputravel-window-digest-v1" || tag_0 || tag_1 || ...): a keyed
  // digest of the plaintext (the GCM tags are MACs of it under the session
  // key), free to compute and revealing nothing to the host that relays it.
  std::string digest;
  // Time spent getting plaintext from the source (views or copies), summed
  // over the workers.
  double read_seconds = 0;
  double total_seconds = 0;
  // True when the source lent views (no copy of the plaintext was made).
  bool zero_copy = false;
};

// The holder's copy-engine path. A window is written through one or more
// lanes, each a copy engine with its own key and counter window, side by
// side; within a lane, chunk i gets counter window.first + i. Workers take chunk indices in counter order, get the
// chunk's plaintext from the source (a view when the source can lend one, a
// copy into private staging otherwise), encrypt it straight into a ring of
// shared-memory bounce slots, and ring the device's doorbell in counter order
// on one SubmitH2DStream call, without waiting for the device to finish the
// chunks before; the device acknowledges each chunk and a slot is reused only
// after its chunk's ack. A window of one chunk is written on the calling
// thread with one unary SubmitH2D (no threads, no stream). The last doorbell
// also releases the ring from the device (no DetachBounce round trip; a write
// that fails before it detaches the ring itself, unless it was cancelled: the
// device may be stalled, and drops the ring at its next key exchange or route
// change). Plaintext never enters the
// bounce ring, and private staging is zeroized when the write ends.
//
// Several lanes share the write's workers (at least one each) and one ring
// (each lane its own slots, through a mapping of its own, and its own
// doorbell stream), so the engines decrypt side by side. The first lane that
// fails stops the others, and is the write's error. The reported digest is
// over every chunk's tag in window order, whatever the number of lanes.
class H2dWriter {
 public:
  H2dWriter(std::shared_ptr<grpc::Channel> device, H2dWriterOptions options);
  ~H2dWriter();

  // Writes `length` bytes of `source` (offsets relative to the window) to
  // device buffer `buffer_id` at `dest_offset`, using exactly the counters of
  // `window` on `key`.
  absl::StatusOr<H2dWriteStats> Write(const ChannelMaterial& key,
                                      uint64_t session_id, uint64_t buffer_id,
                                      uint64_t dest_offset, uint64_t length,
                                      CounterWindow window, H2dSource& source);
  // The same through several copy engines at once: `lanes` tile
  // [0, length) in order (H2dLaneWrite).
  absl::StatusOr<H2dWriteStats> Write(const std::vector<H2dLaneWrite>& lanes,
                                      uint64_t session_id, uint64_t buffer_id,
                                      uint64_t dest_offset, uint64_t length,
                                      H2dSource& source);
  // The same over a copying callback (the fallback path).
  absl::StatusOr<H2dWriteStats> Write(const ChannelMaterial& key,
                                      uint64_t session_id, uint64_t buffer_id,
                                      uint64_t dest_offset, uint64_t length,
                                      CounterWindow window,
                                      const ChunkSource& source);

  // Number of chunks (= counters) a window of `length` bytes needs.
  static uint32_t ChunksFor(uint64_t length, uint32_t chunk_size);

  // The workers and bounce ring a write of `length` bytes uses: `threads`
  // workers (at most one per chunk), one slot per worker plus one at the
  // device (at least options.slots, never more than there are chunks), and
  // slots of chunk_size bytes (a one-chunk window: its own length rounded up
  // to 32). `length` must be non-zero.
  struct Plan {
    int threads;
    uint32_t slots;
    uint32_t slot_size;
  };
  static Plan PlanFor(uint64_t length, const H2dWriterOptions& options);
  // The geometry of each lane of a write through lanes of these lengths:
  // one lane is PlanFor; several share options.threads workers (at least
  // one each) and options.slots slots (at least one per worker plus one per
  // lane), of whole chunks.
  static std::vector<Plan> PlanLanes(const std::vector<uint64_t>& lane_lengths,
                                     const H2dWriterOptions& options);

  // Stops the write in progress, and any later one, with CANCELLED: the call
  // to the device is cancelled, so a write waiting on a stalled device
  // returns at once instead of at its deadline. Callable from any thread.
  void Cancel();

  // How long the device has held a chunk of the write in progress without
  // acknowledging it (zero when none is outstanding or no write runs): a
  // copy engine that stops answering, or doorbells the host holds back.
  // Callable from any thread.
  absl::Duration DeviceWait() const;

 private:
  std::unique_ptr<v1::Device::Stub> stub_;
  H2dWriterOptions options_;
  std::unique_ptr<H2dCancelPoint> cancel_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_H2D_WRITER_H_
