#ifndef GPUTRAVEL_KEYXFER_DEVICE_SESSION_H_
#define GPUTRAVEL_KEYXFER_DEVICE_SESSION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/cc_channel.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

// The key schedule of a session between a requester (the orchestrator's
// driver) and the GPU, modelled on the NVIDIA driver: ECDHE secp384r1, a
// session secret from HKDF-SHA384-Extract over the transcript, and one key +
// IV mask per channel direction from HKDF-Expand with the driver's labels.
// A new session shares nothing with the old one (fresh key agreement, P3);
// NVIDIA's own rotation (HKDF of the old key) is deliberately NOT used.
struct DeviceSessionKeys {
  ChannelMaterial gsp_h2d;  // control commands, requester -> device
  ChannelMaterial gsp_d2h;  // control replies, device -> requester
  ChannelMaterial lce_h2d;  // copy engine 0, host -> device (handed to holders)
  ChannelMaterial lce_d2h;  // copy engine 0, device -> host
};

// The H100's copy engines, LCE0..LCE7: each has its own host-to-device and
// device-to-host key slot (lce0N_h2d_user, lce0N_d2h_user).
inline constexpr uint32_t kCopyEngines = 8;

// What rode on a key exchange, as the signed transcript binds it: digests
// (SHA-384) of the command sealed under the session that ends and of the
// device's answer to it (empty when none), and whether device memory
// survived the exchange.
struct ExchangeBinding {
  std::string prior_command_digest;
  std::string prior_answer_digest;
  bool memory_kept = false;
};

// The signed transcript: binds serial, both ephemeral keys, both nonces, the
// session number and what rode on the exchange.
std::string DeviceSessionTranscript(absl::string_view serial,
                                    absl::string_view requester_public_key,
                                    absl::string_view requester_nonce,
                                    absl::string_view device_public_key,
                                    absl::string_view device_nonce,
                                    uint64_t session_id,
                                    const ExchangeBinding& binding = ExchangeBinding());

// The session secret every key is expanded from: HKDF-SHA384-Extract with
// the transcript's hash as salt over the ECDH secret.
absl::StatusOr<SecretBytes> DeviceSessionSecret(const SecretBytes& ecdh_secret,
                                                absl::string_view transcript);

// The control pair and copy engine 0's pair from the ECDH secret and the
// transcript (DeviceSessionSecret, then ExpandDeviceSessionKeys).
absl::StatusOr<DeviceSessionKeys> DeriveDeviceSessionKeys(
    const SecretBytes& ecdh_secret, absl::string_view transcript);
// The same pairs from a session secret (DeviceSessionSecret's result, never
// the raw ECDH secret, which is not bound to the transcript).
absl::StatusOr<DeviceSessionKeys> ExpandDeviceSessionKeys(const SecretBytes& session_secret);

// One copy engine's key slot: `engine` 0..7, host-to-device (`h2d`) or
// device-to-host. INVALID_ARGUMENT for an engine the GPU does not have.
absl::StatusOr<ChannelMaterial> DeriveCopyEngineKey(const SecretBytes& session_secret,
                                                    uint32_t engine, bool h2d);

// Associated data of control messages: binds direction and session.
std::string ControlAad(bool to_device, uint64_t session_id);

// Associated data of a copy-engine chunk: binds destination buffer and offset,
// so a host that reshuffles staged chunks cannot redirect them.
std::string ChunkAad(uint64_t session_id, uint64_t buffer_id, uint64_t offset,
                     uint32_t length);

// Associated data of a copy-engine device-to-host copy (a read-back under an
// engine's D2H key): binds the session and where the bytes were read from.
std::string D2hCopyAad(uint64_t session_id, uint64_t buffer_id, uint64_t offset,
                       uint64_t length);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_DEVICE_SESSION_H_
