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
  w.Bytes("gputravel-handoff-v2");
  w.Bytes(b.campaign());
  w.U64(b.trip());
  w.Bytes(b.gpu_serial());
  w.U64(b.gpu_session());
  w.Bytes(b.holder());
  w.U64(b.buffer_id());
  w.U64(b.window_offset());
  w.U64(b.window_length());
  w.U32(b.first_counter());
  w.U32(b.counter_count());
  w.U32(b.chunk_size());
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

absl::StatusOr<std::string> WrapHandoff(const SecretBytes& handoff_key,
                                        const v1::HandoffBinding& binding,
                                        const ChannelMaterial& lce_h2d) {
  // The payload carries exactly one AES-256 key: a shorter one would be read
  // past its end, a longer one cut.
  if (lce_h2d.key.size() != kAesKeySize) {
    return absl::InvalidArgumentError(
        "hand-off not wrapped: the LCE H2D channel key is " +
        std::to_string(lce_h2d.key.size()) + " bytes, not the " +
        std::to_string(kAesKeySize) + " of an AES-256 key");
  }
  auto gcm = AesGcm::Create(handoff_key);
  if (!gcm.ok()) return gcm.status();
  SecretBytes payload(kAesKeySize + kGcmIvSize + 8);
  std::copy(lce_h2d.key.data(), lce_h2d.key.data() + kAesKeySize, payload.data());
  std::copy(lce_h2d.iv_mask.begin(), lce_h2d.iv_mask.end(),
            payload.data() + kAesKeySize);
  for (int i = 0; i < 8; ++i) {
    payload.data()[kAesKeySize + kGcmIvSize + i] =
        static_cast<uint8_t>(lce_h2d.channel_counter >> (8 * (7 - i)));
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

absl::StatusOr<ChannelMaterial> UnwrapHandoff(const SecretBytes& handoff_key,
                                              const v1::HandoffBinding& binding,
                                              const std::string& blob) {
  constexpr size_t kPayload = kAesKeySize + kGcmIvSize + 8;
  if (blob.size() != 1 + kGcmIvSize + kPayload + kGcmTagSize) {
    return absl::InvalidArgumentError("hand-off blob has the wrong size (" +
                                      std::to_string(blob.size()) + " bytes)");
  }
  auto* in = reinterpret_cast<const uint8_t*>(blob.data());
  if (in[0] != kHandoffVersion) {
    return absl::InvalidArgumentError("unsupported hand-off version " +
                                      std::to_string(in[0]));
  }
  auto gcm = AesGcm::Create(handoff_key);
  if (!gcm.ok()) return gcm.status();
  std::string aad = HandoffAad(binding);
  SecretBytes payload(kPayload);
  const uint8_t* ct = in + 1 + kGcmIvSize;
  absl::Status st = (*gcm)->Decrypt(
      in + 1, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(), ct,
      kPayload, ct + kPayload, payload.data());
  if (!st.ok()) {
    return absl::PermissionDeniedError(
        "hand-off refused: it was not wrapped for this channel, campaign, "
        "trip, GPU, holder, buffer and window");
  }
  ChannelMaterial m;
  m.key = SecretBytes(payload.data(), kAesKeySize);
  std::copy(payload.data() + kAesKeySize,
            payload.data() + kAesKeySize + kGcmIvSize, m.iv_mask.begin());
  m.channel_counter = 0;
  for (int i = 0; i < 8; ++i) {
    m.channel_counter =
        (m.channel_counter << 8) | payload.data()[kAesKeySize + kGcmIvSize + i];
  }
  return m;
}

}  // namespace gputravel
