#include "keyxfer/attested_channel.h"

#include "keyxfer/hkdf.h"
#include "keyxfer/random.h"
#include "keyxfer/wire.h"

namespace gputravel {
namespace {

// One key per direction, both expanded from the channel's ECDH secret
// salted with its transcript: the hand-off key (orchestrator to holder) and
// the report key (holder to orchestrator).
absl::StatusOr<AttestedChannel> DeriveChannelKeys(const SecretBytes& secret,
                                                  absl::string_view transcript,
                                                  AttestedIdentity peer) {
  auto prk = HkdfSha384Extract(Sha384(transcript), secret);
  if (!prk.ok()) return prk.status();
  auto handoff = HkdfSha384Expand(*prk, "gputravel-o2h-handoff-key", 32);
  if (!handoff.ok()) return handoff.status();
  auto report = HkdfSha384Expand(*prk, "gputravel-h2o-report-key", 32);
  if (!report.ok()) return report.status();
  return AttestedChannel{std::move(*handoff), std::move(*report), Sha384(transcript),
                         std::move(peer)};
}

}  // namespace

std::string ChannelTranscript(absl::string_view initiator_public_key,
                              absl::string_view initiator_nonce,
                              absl::string_view responder_public_key,
                              absl::string_view responder_nonce) {
  WireWriter w;
  w.Bytes("gputravel-attested-channel-v1");
  w.Bytes(initiator_public_key);
  w.Bytes(initiator_nonce);
  w.Bytes(responder_public_key);
  w.Bytes(responder_nonce);
  return w.Take();
}

ReportData ChannelReportData(ChannelRole role, absl::string_view transcript) {
  std::string tag = role == ChannelRole::kOrchestrator
                        ? "gputravel-orchestrator-v1"
                        : "gputravel-holder-v1";
  std::string h = Sha384(tag + std::string(transcript));
  ReportData rd{};
  std::copy(h.begin(), h.end(), rd.begin());
  return rd;
}

absl::StatusOr<ChannelInitiator> ChannelInitiator::Create() {
  auto key = EcKey::Generate(kChannelCurve);
  if (!key.ok()) return key.status();
  ChannelInitiator c(std::move(*key));
  c.public_key_ = c.key_.PublicPoint();
  c.nonce_ = RandomString(kNonceSize);
  return c;
}

absl::StatusOr<AttestedChannel> ChannelInitiator::Complete(
    absl::string_view responder_public_key, absl::string_view responder_nonce,
    const Evidence& responder_evidence, Verifier& verifier, Attester& attester,
    Evidence* own_evidence) {
  if (responder_nonce.size() != kNonceSize) {
    return absl::InvalidArgumentError("holder nonce must be 32 bytes");
  }
  std::string transcript = ChannelTranscript(public_key_, nonce_,
                                             responder_public_key, responder_nonce);
  auto peer = verifier.Verify(responder_evidence,
                              ChannelReportData(ChannelRole::kHolder, transcript));
  if (!peer.ok()) {
    return absl::PermissionDeniedError("holder attestation refused: " +
                                       std::string(peer.status().message()));
  }
  auto secret = key_.DeriveSharedSecret(responder_public_key);
  if (!secret.ok()) return secret.status();
  auto own = attester.Attest(ChannelReportData(ChannelRole::kOrchestrator, transcript));
  if (!own.ok()) return own.status();
  *own_evidence = std::move(*own);
  return DeriveChannelKeys(*secret, transcript, std::move(*peer));
}

absl::StatusOr<ChannelResponder> ChannelResponder::Respond(
    absl::string_view initiator_public_key, absl::string_view initiator_nonce,
    Attester& attester) {
  if (initiator_nonce.size() != kNonceSize) {
    return absl::InvalidArgumentError("orchestrator nonce must be 32 bytes");
  }
  auto key = EcKey::Generate(kChannelCurve);
  if (!key.ok()) return key.status();
  ChannelResponder r;
  r.public_key_ = key->PublicPoint();
  r.nonce_ = RandomString(kNonceSize);
  r.transcript_ = ChannelTranscript(initiator_public_key, initiator_nonce,
                                    r.public_key_, r.nonce_);
  auto secret = key->DeriveSharedSecret(initiator_public_key);
  if (!secret.ok()) return secret.status();
  r.secret_ = std::move(*secret);
  auto ev = attester.Attest(ChannelReportData(ChannelRole::kHolder, r.transcript_));
  if (!ev.ok()) return ev.status();
  r.evidence_ = std::move(*ev);
  return r;
}

absl::StatusOr<AttestedChannel> ChannelResponder::Confirm(
    const Evidence& initiator_evidence, Verifier& verifier) {
  if (secret_.empty()) {
    return absl::FailedPreconditionError("channel already confirmed or consumed");
  }
  auto peer = verifier.Verify(
      initiator_evidence, ChannelReportData(ChannelRole::kOrchestrator, transcript_));
  if (!peer.ok()) {
    return absl::PermissionDeniedError("orchestrator attestation refused: " +
                                       std::string(peer.status().message()));
  }
  auto channel = DeriveChannelKeys(secret_, transcript_, std::move(*peer));
  secret_.Clear();
  return channel;
}

}  // namespace gputravel
