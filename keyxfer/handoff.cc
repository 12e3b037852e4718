#include "keyxfer/handoff.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "keyxfer/aes_gcm.h"
#include "keyxfer/random.h"
#include "keyxfer/wire.h"

namespace gputravel {

std::string HandoffAad(const v1::HandoffBinding& b) {
  WireWriter w;
  w.Bytes("gputravel-handoff-v3");
  w.Bytes(b.campaign());
  w.U64(b.trip());
  w.Bytes(b.gpu_serial());
  w.U64(b.gpu_session());
  w.Bytes(b.holder());
  w.U64(b.buffer_id());
  w.U64(b.window_offset());
  w.U64(b.window_length());
  w.U32(b.chunk_size());
  w.U32(static_cast<uint32_t>(b.lanes_size()));
  for (const v1::H2dLane& l : b.lanes()) {
    w.U32(l.copy_engine());
    w.U64(l.offset());
    w.U64(l.length());
    w.U32(l.first_counter());
    w.U32(l.counter_count());
  }
  const v1::TrainingTerms& t = b.terms();
  w.Bytes(t.trainer_kind());
  w.U32(t.vocab());
  w.U32(t.dim());
  uint64_t lr_bits;
  const double lr = t.learning_rate();
  static_assert(sizeof(lr_bits) == sizeof(lr), "IEEE-754 double");
  std::memcpy(&lr_bits, &lr, sizeof(lr_bits));
  w.U64(lr_bits);
  w.U64(t.batch_tokens());
  w.U64(t.seed());
  w.U64(t.min_window_bytes());
  w.U32(t.loss_decimals());
  w.U32(t.min_windows_per_loss());
  return w.Take();
}

namespace {

constexpr size_t kLanePayload = kAesKeySize + kGcmIvSize + 8;

}  // namespace

absl::StatusOr<std::string> WrapHandoff(const SecretBytes& handoff_key,
                                        const v1::HandoffBinding& binding,
                                        const std::vector<ChannelMaterial>& lane_keys) {
  if (lane_keys.empty() || lane_keys.size() != static_cast<size_t>(binding.lanes_size())) {
    return absl::InvalidArgumentError(
        "hand-off not wrapped: " + std::to_string(lane_keys.size()) + " keys for " +
        std::to_string(binding.lanes_size()) + " lanes (one key per lane, at least one)");
  }
  // The payload carries AES-256 keys: a shorter one would be read past its
  // end, a longer one cut.
  for (const ChannelMaterial& k : lane_keys) {
    if (k.key.size() != kAesKeySize) {
      return absl::InvalidArgumentError(
          "hand-off not wrapped: an H2D channel key is " + std::to_string(k.key.size()) +
          " bytes, not the " + std::to_string(kAesKeySize) + " of an AES-256 key");
    }
  }
  auto gcm = AesGcm::Create(handoff_key);
  if (!gcm.ok()) return gcm.status();
  SecretBytes payload(kLanePayload * lane_keys.size());
  for (size_t i = 0; i < lane_keys.size(); ++i) {
    const ChannelMaterial& k = lane_keys[i];
    uint8_t* p = payload.data() + i * kLanePayload;
    std::copy(k.key.data(), k.key.data() + kAesKeySize, p);
    std::copy(k.iv_mask.begin(), k.iv_mask.end(), p + kAesKeySize);
    for (int j = 0; j < 8; ++j) {
      p[kAesKeySize + kGcmIvSize + j] = static_cast<uint8_t>(k.channel_counter >> (8 * (7 - j)));
    }
  }
  uint8_t iv[kGcmIvSize];
  RandomBytes(iv, sizeof(iv));
  std::string aad = HandoffAad(binding);
  std::string blob(1 + kGcmIvSize + payload.size() + kGcmTagSize, '\0');
  auto* out = reinterpret_cast<uint8_t*>(&blob[0]);
  out[0] = kHandoffVersion;
  std::copy(iv, iv + kGcmIvSize, out + 1);
  uint8_t* ct = out + 1 + kGcmIvSize;
  absl::Status st =
      (*gcm)->Encrypt(iv, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
                      payload.data(), payload.size(), ct, ct + payload.size());
  if (!st.ok()) return st;
  return blob;
}

absl::StatusOr<std::vector<ChannelMaterial>> UnwrapHandoff(const SecretBytes& handoff_key,
                                                           const v1::HandoffBinding& binding,
                                                           const std::string& blob) {
  const size_t lanes = static_cast<size_t>(binding.lanes_size());
  if (lanes == 0) {
    return absl::InvalidArgumentError("hand-off names no copy-engine lane");
  }
  const size_t payload_size = kLanePayload * lanes;
  if (blob.size() != 1 + kGcmIvSize + payload_size + kGcmTagSize) {
    return absl::InvalidArgumentError("hand-off blob has the wrong size (" +
                                      std::to_string(blob.size()) + " bytes for " +
                                      std::to_string(lanes) + " lanes)");
  }
  auto* in = reinterpret_cast<const uint8_t*>(blob.data());
  if (in[0] != kHandoffVersion) {
    return absl::InvalidArgumentError("unsupported hand-off version " +
                                      std::to_string(in[0]));
  }
  auto gcm = AesGcm::Create(handoff_key);
  if (!gcm.ok()) return gcm.status();
  std::string aad = HandoffAad(binding);
  SecretBytes payload(payload_size);
  const uint8_t* ct = in + 1 + kGcmIvSize;
  absl::Status st = (*gcm)->Decrypt(
      in + 1, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(), ct,
      payload_size, ct + payload_size, payload.data());
  if (!st.ok()) {
    return absl::PermissionDeniedError(
        "hand-off refused: it was not wrapped for this channel, campaign, "
        "trip, GPU, holder, buffer, window and lanes");
  }
  std::vector<ChannelMaterial> keys(lanes);
  for (size_t i = 0; i < lanes; ++i) {
    const uint8_t* p = payload.data() + i * kLanePayload;
    ChannelMaterial& m = keys[i];
    m.key = SecretBytes(p, kAesKeySize);
    std::copy(p + kAesKeySize, p + kAesKeySize + kGcmIvSize, m.iv_mask.begin());
    m.channel_counter = 0;
    for (int j = 0; j < 8; ++j) {
      m.channel_counter = (m.channel_counter << 8) | p[kAesKeySize + kGcmIvSize + j];
    }
  }
  return keys;
}

}  // namespace gputravel
