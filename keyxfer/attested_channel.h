#ifndef GPUTRAVEL_KEYXFER_ATTESTED_CHANNEL_H_
#define GPUTRAVEL_KEYXFER_ATTESTED_CHANNEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/attester.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

inline constexpr size_t kNonceSize = 32;

// The channel's ephemeral ECDH curve. P-256 matches the strength of the TDX
// attestation the channel rests on (quotes are signed with ECDSA P-256) and
// costs ~45 us per operation against ~0.75 ms for P-384 with OpenSSL 3.0 on
// x86-64, which puts it off the trip's critical path. The GPU's own SPDM
// session stays P-384, as the real driver's (device/gpu_session.h).
inline constexpr Curve kChannelCurve = Curve::kP256;

// Mutual attested key agreement between the orchestrator (initiator) and a
// holder (responder), RA-TLS style: ephemeral ECDH (kChannelCurve) on both sides; each
// side's evidence carries REPORTDATA = SHA-384(role tag || transcript) || 0^16,
// where the transcript holds both nonces and both public keys. So evidence
// cannot be replayed (fresh nonces), moved to another key (keys in the
// transcript) or reflected (role tags differ).
std::string ChannelTranscript(absl::string_view initiator_public_key,
                              absl::string_view initiator_nonce,
                              absl::string_view responder_public_key,
                              absl::string_view responder_nonce);

enum class ChannelRole { kOrchestrator, kHolder };
ReportData ChannelReportData(ChannelRole role, absl::string_view transcript);

// The result: a key for wrapping hand-offs (orchestrator -> holder), a key
// for sealing the holder's provisioning report (holder -> orchestrator,
// keyxfer/report_seal.h), and what attestation proved about the peer.
struct AttestedChannel {
  SecretBytes handoff_key;
  SecretBytes report_key;
  std::string transcript_hash;  // SHA-384 of the transcript (channel id)
  AttestedIdentity peer;
};

// Orchestrator side.
class ChannelInitiator {
 public:
  static absl::StatusOr<ChannelInitiator> Create();
  const std::string& public_key() const { return public_key_; }
  const std::string& nonce() const { return nonce_; }

  // Verifies the holder's evidence against the transcript, attests itself for
  // the holder (`own_evidence`) and derives the channel key.
  absl::StatusOr<AttestedChannel> Complete(absl::string_view responder_public_key,
                                           absl::string_view responder_nonce,
                                           const Evidence& responder_evidence,
                                           Verifier& verifier, Attester& attester,
                                           Evidence* own_evidence);

 private:
  explicit ChannelInitiator(EcKey key) : key_(std::move(key)) {}
  EcKey key_;
  std::string public_key_, nonce_;
};

// Holder side. Respond() derives the key at once but the channel is not
// usable until Confirm() has verified the orchestrator's evidence.
class ChannelResponder {
 public:
  static absl::StatusOr<ChannelResponder> Respond(
      absl::string_view initiator_public_key, absl::string_view initiator_nonce,
      Attester& attester);
  const std::string& public_key() const { return public_key_; }
  const std::string& nonce() const { return nonce_; }
  const Evidence& evidence() const { return evidence_; }

  absl::StatusOr<AttestedChannel> Confirm(const Evidence& initiator_evidence,
                                          Verifier& verifier);

 private:
  ChannelResponder() = default;
  std::string public_key_, nonce_, transcript_;
  SecretBytes secret_;
  Evidence evidence_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_ATTESTED_CHANNEL_H_
