#ifndef GPUTRAVEL_BENCH_GCM_REFERENCE_H_
#define GPUTRAVEL_BENCH_GCM_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gputravel {
namespace bench {

// One single-thread OpenSSL AES-256-GCM figure.
struct GcmReference {
  size_t message_bytes = 0;
  bool into_ring = false;  // out of place, private staging -> /dev/shm ring
  // With into_ring: the messages are read in turn from a large buffer (as the
  // holder reads its dataset) instead of from staging that stays in cache.
  bool large_source = false;
  // MeasureGcmBothSides: this many encrypting and as many decrypting threads
  // at once (0: one thread, encrypting only).
  int pairs = 0;
  uint64_t messages = 0;
  double seconds = 0;
  double mbps = 0;  // 1e6 bytes/s, as `openssl speed` reports (in 1000s)
};

// The yardstick of every ratio: OpenSSL EVP AES-256-GCM on one thread,
// encrypting one `message_bytes` buffer in place again and again for about
// `min_seconds`, like `openssl speed -evp aes-256-gcm -bytes N`. Each message
// is a whole AEAD operation (fresh IV, 32 bytes of AAD, final, tag), as the
// data path does per chunk; the key schedule is set up once.
absl::StatusOr<GcmReference> MeasureGcmReference(size_t message_bytes,
                                                 double min_seconds);

// The machine's capacity for `threads` encryptions at once: the loop of
// MeasureGcmReference on `threads` threads together, each on its own buffer;
// `mbps` is their sum. Not the yardstick of any target (those are threads x
// the single-thread figure); it tells how much of a shortfall is the
// machine's (shared cores, memory) rather than the pipeline's.
absl::StatusOr<GcmReference> MeasureGcmReferenceConcurrent(size_t message_bytes,
                                                           double min_seconds,
                                                           int threads);

// The same single-thread loop, but out of place as the stage does it: message
// k is read from private staging buffer k % slots and written to slot
// k % slots of a BounceBuffer ring in `bounce_dir` (no reader, no zeroize, no
// threads). The gap to MeasureGcmReference is the cost of memory traffic.
// OpenSSL writes the ring directly here; the stage does not (it makes each
// piece of ciphertext privately and streams it into the ring, since the host
// can write the ring), so the gap from this to the stage is that copy plus
// the pipeline's own overhead.
absl::StatusOr<GcmReference> MeasureGcmIntoBounceRing(size_t message_bytes, uint32_t slots,
                                                      const std::string& bounce_dir,
                                                      double min_seconds);

// The same into the ring, but message k is read from offset k x message_bytes
// (wrapping) of a `source_bytes` buffer, as the holder's workers read a
// dataset far larger than the caches: what OpenSSL alone does with the
// holder's memory traffic, without the private-piece copy the stage makes
// (above) and without any pipeline.
absl::StatusOr<GcmReference> MeasureGcmFromLargeSource(size_t message_bytes,
                                                       size_t source_bytes, uint32_t slots,
                                                       const std::string& bounce_dir,
                                                       double min_seconds);

// Both sides of a provisioning with OpenSSL alone: the most any data path can
// get from this machine's cores and memory, with the same memory traffic.
// `pairs` pairs of threads run at once, each moving its share of a
// `window_bytes` window through its own ring of `slots` slots of
// `message_bytes` in `bounce_dir`. In a pair, one thread encrypts message k
// from offset k x message_bytes of its share of a source (as the holder
// reads its dataset) into slot k % slots; the other, once the message is
// there, decrypts it into the same offset of its share of a destination (as
// a copy engine writes device memory) and checks its tag, and the slot is
// free again. Nothing else: no private pieces, no doorbells, no other
// threads; the two hand slots over by spinning on counters. The source and
// destination are touched before the clock starts; `mbps` is the window's
// bytes over the wall time until every pair is done.
absl::StatusOr<GcmReference> MeasureGcmBothSides(size_t message_bytes, uint64_t window_bytes,
                                                 uint32_t slots, int pairs,
                                                 const std::string& bounce_dir);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_GCM_REFERENCE_H_
