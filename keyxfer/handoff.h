#ifndef GPUTRAVEL_KEYXFER_HANDOFF_H_
#define GPUTRAVEL_KEYXFER_HANDOFF_H_

#include <string>

#include "absl/status/statusor.h"
#include "keyxfer/cc_channel.h"
#include "keyxfer/secret_bytes.h"
#include "proto/holder.pb.h"

namespace gputravel {

// The trip hand-off (format v2, docs/protocol.md): exactly what a holder needs
// to write its dataset buffer: the LCE H2D channel key, IV mask and channel
// counter. The counter window, the campaign's training terms and everything
// else it is bound to travel in HandoffBinding, authenticated as AES-256-GCM
// associated data.
//   blob = 0x02 || IV (12 random bytes) || AES-256-GCM(key, IV, AAD, payload) || tag
//   payload = key (32) || iv_mask (12) || channel_counter (8, big-endian)
inline constexpr uint8_t kHandoffVersion = 2;

std::string HandoffAad(const v1::HandoffBinding& binding);

absl::StatusOr<std::string> WrapHandoff(const SecretBytes& handoff_key,
                                        const v1::HandoffBinding& binding,
                                        const ChannelMaterial& lce_h2d);

// Refuses a blob for another campaign/trip/GPU/holder/buffer/window/terms (AEAD
// failure) or another channel (different key), or of an unknown version.
absl::StatusOr<ChannelMaterial> UnwrapHandoff(const SecretBytes& handoff_key,
                                              const v1::HandoffBinding& binding,
                                              const std::string& blob);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_HANDOFF_H_
