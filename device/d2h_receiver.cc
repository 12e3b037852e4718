#include "device/d2h_receiver.h"

#include <limits>

#include "keyxfer/device_session.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

absl::StatusOr<D2hReceiver> D2hReceiver::Create(ChannelMaterial m, uint32_t engine) {
  auto c = ChannelCipher::Create(m);
  if (!c.ok()) return c.status();
  D2hReceiver r;
  r.engine = engine;
  r.cipher = std::move(*c);
  r.material = std::move(m);
  return r;
}

absl::Status D2hReceiver::Rotate(uint64_t device_channel) {
  if (material.key.size() == 0) {
    return absl::FailedPreconditionError("no D2H channel to rotate: establish first");
  }
  if (material.channel_counter == std::numeric_limits<uint64_t>::max() ||
      device_channel != material.channel_counter + 1) {
    return absl::DataLossError(
        "the GPU rotated LCE" + std::to_string(engine) + "'s D2H IV to channel counter " +
        std::to_string(device_channel) + ", this end expected " +
        (material.channel_counter == std::numeric_limits<uint64_t>::max()
             ? std::string("none (its last channel counter is spent)")
             : std::to_string(material.channel_counter + 1)));
  }
  ChannelMaterial next_material = material.Clone();
  next_material.channel_counter = device_channel;
  auto c = ChannelCipher::Create(next_material);
  if (!c.ok()) return c.status();
  cipher = std::move(*c);
  material = std::move(next_material);
  next = kFirstMessageCounter;
  exhausted = false;
  return absl::OkStatus();
}

absl::Status D2hReceiver::Open(const v1::DeviceCommand& cmd, uint64_t session_id,
                               const std::string& copy, v1::DeviceReply* reply) {
  uint64_t buffer = 0, offset = 0, length = 0;
  uint32_t named = engine;
  if (cmd.has_read()) {
    buffer = cmd.read().buffer_id();
    offset = cmd.read().offset();
    length = cmd.read().length();
    named = cmd.read().copy_engine();
  } else if (cmd.has_scrub()) {
    buffer = cmd.scrub().buffer_id();
    length = cmd.scrub().read_back();
    named = cmd.scrub().copy_engine();
  }
  if (named != engine && length != 0) {
    return absl::InvalidArgumentError("the command names copy engine " +
                                      std::to_string(named) + "; this receiver opens LCE" +
                                      std::to_string(engine) + "'s copies");
  }
  if (length == 0) {
    if (!copy.empty()) return absl::DataLossError("the GPU sent a D2H copy nobody asked for");
    return absl::OkStatus();
  }
  if (cipher == nullptr) return absl::FailedPreconditionError("no D2H channel: establish first");
  if (exhausted) return absl::ResourceExhaustedError("the D2H counter is spent: re-key");
  if (copy.size() != length + kGcmTagSize || reply->d2h_length() != length) {
    return absl::DataLossError("the GPU's D2H copy has " + std::to_string(copy.size()) +
                               " bytes for a read of " + std::to_string(length));
  }
  std::string plain(length, '\0');
  const std::string aad = D2hCopyAad(session_id, buffer, offset, length);
  const auto* in = reinterpret_cast<const uint8_t*>(copy.data());
  absl::Status s = cipher->Decrypt(next, reinterpret_cast<const uint8_t*>(aad.data()),
                                   aad.size(), in, length, in + length,
                                   reinterpret_cast<uint8_t*>(&plain[0]));
  if (!s.ok()) {
    return absl::DataLossError(
        "the GPU's D2H copy does not authenticate at counter " + std::to_string(next) +
        " for buffer " + std::to_string(buffer) + " [" + std::to_string(offset) + ", +" +
        std::to_string(length) + "): not this session's key, out of order, or not what "
        "was asked for");
  }
  if (next == kLastMessageCounter) exhausted = true; else ++next;
  *reply->mutable_data() = std::move(plain);
  return absl::OkStatus();
}

}  // namespace gputravel
