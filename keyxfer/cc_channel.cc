#include "keyxfer/cc_channel.h"

namespace gputravel {

std::array<uint8_t, kGcmIvSize> ChannelIv(uint32_t message_counter,
                                          uint64_t channel_counter,
                                          const IvMask& mask) {
  std::array<uint8_t, kGcmIvSize> iv{};
  uint32_t words[3] = {message_counter, static_cast<uint32_t>(channel_counter),
                       static_cast<uint32_t>(channel_counter >> 32)};
  for (int w = 0; w < 3; ++w) {
    for (int b = 0; b < 4; ++b) {
      iv[w * 4 + b] = static_cast<uint8_t>(words[w] >> (8 * b)) ^ mask[w * 4 + b];
    }
  }
  return iv;
}

absl::StatusOr<std::unique_ptr<ChannelCipher>> ChannelCipher::Create(
    const ChannelMaterial& material) {
  auto gcm = AesGcm::Create(material.key);
  if (!gcm.ok()) return gcm.status();
  return std::unique_ptr<ChannelCipher>(new ChannelCipher(
      std::move(*gcm), material.iv_mask, material.channel_counter));
}

absl::Status ChannelCipher::Encrypt(uint32_t counter, const uint8_t* aad,
                                    size_t aad_len, const uint8_t* in, size_t n,
                                    uint8_t* out, uint8_t tag[kGcmTagSize]) {
  auto iv = ChannelIv(counter, channel_counter_, mask_);
  return gcm_->Encrypt(iv.data(), aad, aad_len, in, n, out, tag);
}

absl::Status ChannelCipher::Decrypt(uint32_t counter, const uint8_t* aad,
                                    size_t aad_len, const uint8_t* in, size_t n,
                                    const uint8_t tag[kGcmTagSize],
                                    uint8_t* out) {
  auto iv = ChannelIv(counter, channel_counter_, mask_);
  return gcm_->Decrypt(iv.data(), aad, aad_len, in, n, tag, out);
}

absl::Status ChannelCipher::EncryptToShared(uint32_t counter, const uint8_t* aad,
                                            size_t aad_len, const uint8_t* in, size_t n,
                                            uint8_t* shared_out, uint8_t tag[kGcmTagSize]) {
  auto iv = ChannelIv(counter, channel_counter_, mask_);
  return gcm_->EncryptToShared(iv.data(), aad, aad_len, in, n, shared_out, tag);
}

absl::Status ChannelCipher::DecryptFromShared(uint32_t counter, const uint8_t* aad,
                                              size_t aad_len, const uint8_t* shared_in,
                                              size_t n, const uint8_t tag[kGcmTagSize],
                                              uint8_t* out) {
  auto iv = ChannelIv(counter, channel_counter_, mask_);
  return gcm_->DecryptFromShared(iv.data(), aad, aad_len, shared_in, n, tag, out);
}

absl::StatusOr<std::unique_ptr<SealedChannel>> SealedChannel::Create(
    const ChannelMaterial& send, const ChannelMaterial& receive) {
  auto s = ChannelCipher::Create(send);
  if (!s.ok()) return s.status();
  auto r = ChannelCipher::Create(receive);
  if (!r.ok()) return r.status();
  auto ch = std::unique_ptr<SealedChannel>(new SealedChannel());
  ch->send_ = std::move(*s);
  ch->receive_ = std::move(*r);
  return ch;
}

absl::StatusOr<std::string> SealedChannel::Seal(absl::string_view aad,
                                                absl::string_view plaintext,
                                                uint32_t* counter_used) {
  if (send_exhausted_) {
    return absl::ResourceExhaustedError(
        "channel message counter exhausted: re-key before sending more");
  }
  std::string out(plaintext.size() + kGcmTagSize, '\0');
  auto* o = reinterpret_cast<uint8_t*>(&out[0]);
  uint32_t counter = send_next_;
  absl::Status st = send_->Encrypt(
      counter, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
      reinterpret_cast<const uint8_t*>(plaintext.data()), plaintext.size(), o,
      o + plaintext.size());
  if (!st.ok()) return st;
  if (counter == kLastMessageCounter) send_exhausted_ = true; else ++send_next_;
  if (counter_used != nullptr) *counter_used = counter;
  return out;
}

absl::StatusOr<std::string> SealedChannel::Open(absl::string_view aad,
                                                absl::string_view sealed) {
  if (receive_exhausted_) {
    return absl::ResourceExhaustedError(
        "channel message counter exhausted: re-key before receiving more");
  }
  if (sealed.size() < kGcmTagSize) {
    return absl::InvalidArgumentError("sealed message shorter than its tag");
  }
  size_t n = sealed.size() - kGcmTagSize;
  std::string out(n, '\0');
  auto* in = reinterpret_cast<const uint8_t*>(sealed.data());
  absl::Status st = receive_->Decrypt(
      receive_next_, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
      in, n, in + n, reinterpret_cast<uint8_t*>(&out[0]));
  if (!st.ok()) return st;
  if (receive_next_ == kLastMessageCounter) receive_exhausted_ = true; else ++receive_next_;
  return out;
}

}  // namespace gputravel
