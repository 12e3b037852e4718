#ifndef GPUTRAVEL_KEYXFER_HANDOFF_H_
#define GPUTRAVEL_KEYXFER_HANDOFF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "keyxfer/cc_channel.h"
#include "keyxfer/secret_bytes.h"
#include "proto/holder.pb.h"

namespace gputravel {

// The trip hand-off (format v3, docs/protocol.md): exactly what a holder needs
// to write its dataset buffer: for each lane of the binding (one copy engine
// each, HandoffBinding.lanes), that engine's H2D channel key, IV mask and
// channel counter. The lanes' counter windows and byte ranges, the
// campaign's training terms and everything else the keys are bound to
// travel in HandoffBinding, authenticated as AES-256-GCM associated data.
//   blob = 0x03 || IV (12 random bytes) || AES-256-GCM(key, IV, AAD, payload) || tag
//   payload = per lane, in the binding's order:
//             key (32) || iv_mask (12) || channel_counter (8, big-endian)
inline constexpr uint8_t kHandoffVersion = 3;

std::string HandoffAad(const v1::HandoffBinding& binding);

// `lane_keys` holds one key per lane of `binding`, in the same order.
absl::StatusOr<std::string> WrapHandoff(const SecretBytes& handoff_key,
                                        const v1::HandoffBinding& binding,
                                        const std::vector<ChannelMaterial>& lane_keys);

// The lanes' keys, in the binding's order. Refuses a blob for another
// campaign/trip/GPU/holder/buffer/window/lanes/terms (AEAD failure) or
// another channel (different key), of an unknown version, or whose number of
// keys is not the binding's number of lanes.
absl::StatusOr<std::vector<ChannelMaterial>> UnwrapHandoff(const SecretBytes& handoff_key,
                                                           const v1::HandoffBinding& binding,
                                                           const std::string& blob);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_HANDOFF_H_
