#include "keyxfer/device_session.h"

#include "keyxfer/hkdf.h"
#include "keyxfer/wire.h"

namespace gputravel {

std::string DeviceSessionTranscript(absl::string_view serial,
                                    absl::string_view requester_public_key,
                                    absl::string_view requester_nonce,
                                    absl::string_view device_public_key,
                                    absl::string_view device_nonce,
                                    uint64_t session_id,
                                    const ExchangeBinding& binding) {
  WireWriter w;
  w.Bytes("gputravel-device-session-v2");
  w.Bytes(serial);
  w.Bytes(requester_public_key);
  w.Bytes(requester_nonce);
  w.Bytes(device_public_key);
  w.Bytes(device_nonce);
  w.U64(session_id);
  w.Bytes(binding.prior_command_digest);
  w.Bytes(binding.prior_answer_digest);
  w.U32(binding.memory_kept ? 1 : 0);
  return w.Take();
}

namespace {

absl::StatusOr<ChannelMaterial> DeriveChannel(const SecretBytes& prk,
                                              absl::string_view label) {
  auto key = HkdfSha384Expand(prk, std::string(label) + "_key", kAesKeySize);
  if (!key.ok()) return key.status();
  auto mask = HkdfSha384Expand(prk, std::string(label) + "_ivmask", kGcmIvSize);
  if (!mask.ok()) return mask.status();
  ChannelMaterial m;
  m.key = std::move(*key);
  std::copy(mask->data(), mask->data() + kGcmIvSize, m.iv_mask.begin());
  m.channel_counter = 0;
  return m;
}

}  // namespace

absl::StatusOr<SecretBytes> DeviceSessionSecret(const SecretBytes& ecdh_secret,
                                                absl::string_view transcript) {
  return HkdfSha384Extract(Sha384(transcript), ecdh_secret);
}

absl::StatusOr<DeviceSessionKeys> DeriveDeviceSessionKeys(
    const SecretBytes& ecdh_secret, absl::string_view transcript) {
  auto prk = DeviceSessionSecret(ecdh_secret, transcript);
  if (!prk.ok()) return prk.status();
  return ExpandDeviceSessionKeys(*prk);
}

absl::StatusOr<DeviceSessionKeys> ExpandDeviceSessionKeys(const SecretBytes& session_secret) {
  DeviceSessionKeys k;
  for (auto [label, out] : {std::pair<const char*, ChannelMaterial*>{"gsp_h2d", &k.gsp_h2d},
                            {"gsp_d2h", &k.gsp_d2h}}) {
    auto m = DeriveChannel(session_secret, label);
    if (!m.ok()) return m.status();
    *out = std::move(*m);
  }
  auto h2d = DeriveCopyEngineKey(session_secret, 0, true);
  if (!h2d.ok()) return h2d.status();
  k.lce_h2d = std::move(*h2d);
  auto d2h = DeriveCopyEngineKey(session_secret, 0, false);
  if (!d2h.ok()) return d2h.status();
  k.lce_d2h = std::move(*d2h);
  return k;
}

absl::StatusOr<ChannelMaterial> DeriveCopyEngineKey(const SecretBytes& session_secret,
                                                    uint32_t engine, bool h2d) {
  if (engine >= kCopyEngines) {
    return absl::InvalidArgumentError("copy engine " + std::to_string(engine) +
                                      " does not exist (LCE0..LCE" +
                                      std::to_string(kCopyEngines - 1) + ")");
  }
  std::string label = "lce0" + std::to_string(engine) + (h2d ? "_h2d_user" : "_d2h_user");
  return DeriveChannel(session_secret, label);
}

std::string ControlAad(bool to_device, uint64_t session_id) {
  WireWriter w;
  w.Bytes(to_device ? "gputravel-gsp-h2d" : "gputravel-gsp-d2h");
  w.U64(session_id);
  return w.Take();
}

std::string ChunkAad(uint64_t session_id, uint64_t buffer_id, uint64_t offset,
                     uint32_t length) {
  WireWriter w;
  w.U64(session_id);
  w.U64(buffer_id);
  w.U64(offset);
  w.U32(length);
  return w.Take();
}

std::string D2hCopyAad(uint64_t session_id, uint64_t buffer_id, uint64_t offset,
                       uint64_t length) {
  WireWriter w;
  w.Bytes("gputravel-lce-d2h");
  w.U64(session_id);
  w.U64(buffer_id);
  w.U64(offset);
  w.U64(length);
  return w.Take();
}

}  // namespace gputravel
