#ifndef GPUTRAVEL_DEVICE_WINDOW_DIGEST_H_
#define GPUTRAVEL_DEVICE_WINDOW_DIGEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "device/h2d_lane.h"
#include "keyxfer/cc_channel.h"

namespace gputravel {

// The digest of one window of H2D chunks: the TagDigest of the GCM tags that
// encrypting `plaintext` in `chunk_size` chunks under `key`, counters from
// `first_counter`, for (session, buffer, dest_offset + chunk offset), gives.
// The holder's writer reports it for what it sent (H2dWriter); the
// orchestrator recomputes it from the plaintext it reads back, so a match
// says the device holds exactly what the holder encrypted.
absl::StatusOr<std::string> WindowDigest(const ChannelMaterial& key, uint64_t session_id,
                                         uint64_t buffer_id, uint64_t dest_offset,
                                         const std::string& plaintext, uint32_t chunk_size,
                                         uint32_t first_counter);

// The same for a window written through lanes (H2dWriter): each lane's
// chunks under its own key and counters, the tags in window order. For one
// lane it is the digest above.
absl::StatusOr<std::string> WindowDigest(const std::vector<H2dLaneWrite>& lanes,
                                         uint64_t session_id, uint64_t buffer_id,
                                         uint64_t dest_offset, const std::string& plaintext,
                                         uint32_t chunk_size);

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_WINDOW_DIGEST_H_
