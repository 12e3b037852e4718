#ifndef GPUTRAVEL_KEYXFER_CC_CHANNEL_H_
#define GPUTRAVEL_KEYXFER_CC_CHANNEL_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "keyxfer/aes_gcm.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

using IvMask = std::array<uint8_t, kGcmIvSize>;

// Key material of one direction of one channel, as the NVIDIA driver keeps it
// (CC_AES_CRYPTOBUNDLE: key, iv, ivMask): the IV is three little-endian 32-bit
// words, word 0 a message counter and words 1-2 a 64-bit channel counter; the
// IV used for GCM is iv XOR ivMask.
struct ChannelMaterial {
  SecretBytes key;       // 32 bytes
  IvMask iv_mask{};      // 12 bytes (not secret on its own, but kept with the key)
  uint64_t channel_counter = 0;

  ChannelMaterial Clone() const { return {key.Clone(), iv_mask, channel_counter}; }
};

// The first message counter of a fresh channel: the driver increments the
// counter before each encrypt, so a fresh channel's first message uses 1.
inline constexpr uint32_t kFirstMessageCounter = 1;
inline constexpr uint32_t kLastMessageCounter = 0xFFFFFFFFu;
// The driver rotates a channel's IV (a new channel counter, the message
// counter from the first again) once at most this many message counters are
// left (UVM's default; tunable there, and in GpuSession here).
inline constexpr uint64_t kIvRotationThreshold = uint64_t{1} << 31;

// The 96-bit GCM IV for `message_counter` on a channel.
std::array<uint8_t, kGcmIvSize> ChannelIv(uint32_t message_counter,
                                          uint64_t channel_counter,
                                          const IvMask& mask);

// Encrypts/decrypts with explicit message counters. Not thread-safe: one per
// thread (the key schedule is set up once).
class ChannelCipher {
 public:
  static absl::StatusOr<std::unique_ptr<ChannelCipher>> Create(
      const ChannelMaterial& material);

  absl::Status Encrypt(uint32_t counter, const uint8_t* aad, size_t aad_len,
                       const uint8_t* in, size_t n, uint8_t* out,
                       uint8_t tag[kGcmTagSize]);
  absl::Status Decrypt(uint32_t counter, const uint8_t* aad, size_t aad_len,
                       const uint8_t* in, size_t n, const uint8_t tag[kGcmTagSize],
                       uint8_t* out);
  // For bounce buffers, which the host can write while the call runs
  // (AesGcm::EncryptToShared / DecryptFromShared).
  absl::Status EncryptToShared(uint32_t counter, const uint8_t* aad, size_t aad_len,
                               const uint8_t* in, size_t n, uint8_t* shared_out,
                               uint8_t tag[kGcmTagSize]);
  absl::Status DecryptFromShared(uint32_t counter, const uint8_t* aad, size_t aad_len,
                                 const uint8_t* shared_in, size_t n,
                                 const uint8_t tag[kGcmTagSize], uint8_t* out);

 private:
  ChannelCipher(std::unique_ptr<AesGcm> gcm, const IvMask& mask, uint64_t cc)
      : gcm_(std::move(gcm)), mask_(mask), channel_counter_(cc) {}
  std::unique_ptr<AesGcm> gcm_;
  IvMask mask_;
  uint64_t channel_counter_;
};

// One end of a control channel: sends with its own counter and receives in
// strict counter order (the receiver supplies the IV, the sender cannot).
class SealedChannel {
 public:
  static absl::StatusOr<std::unique_ptr<SealedChannel>> Create(
      const ChannelMaterial& send, const ChannelMaterial& receive);

  // Seals with the next send counter; returns ciphertext || tag.
  absl::StatusOr<std::string> Seal(absl::string_view aad,
                                   absl::string_view plaintext,
                                   uint32_t* counter_used);
  // Opens with the next expected receive counter; the counter advances only
  // on success, so a forged message cannot desynchronise the channel. The
  // message at the last counter is opened like any other; after it the
  // channel refuses everything (ResourceExhausted: re-key).
  absl::StatusOr<std::string> Open(absl::string_view aad,
                                   absl::string_view sealed);

  // Whether Seal can still send (its last counter is not spent).
  bool can_send() const { return !send_exhausted_; }

  // Tests: both directions continue from `counter` (exhaustion is 2^32
  // messages away otherwise).
  void SkipToCounterForTest(uint32_t counter) {
    send_next_ = receive_next_ = counter;
  }

 private:
  std::unique_ptr<ChannelCipher> send_, receive_;
  uint32_t send_next_ = kFirstMessageCounter;
  uint32_t receive_next_ = kFirstMessageCounter;
  bool send_exhausted_ = false;
  bool receive_exhausted_ = false;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_CC_CHANNEL_H_
