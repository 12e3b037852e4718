#ifndef GPUTRAVEL_DEVICE_D2H_RECEIVER_H_
#define GPUTRAVEL_DEVICE_D2H_RECEIVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "keyxfer/cc_channel.h"
#include "proto/device.pb.h"

namespace gputravel {

// The receiving end of one copy engine's device-to-host channel: read-backs
// come encrypted under the session's lce0N_d2h_user key, and are opened in
// counter order at the counter this end expects (the device's counter in the
// reply is advisory).
struct D2hReceiver {
  uint32_t engine = 0;  // the copy engine whose D2H key `cipher` holds
  std::unique_ptr<ChannelCipher> cipher;
  // The key and IV mask `cipher` was made from, and its channel counter:
  // what an IV rotation needs (optional where nothing rotates).
  ChannelMaterial material;
  uint32_t next = kFirstMessageCounter;
  bool exhausted = false;

  // A receiver for `m`, with `cipher` made from it.
  static absl::StatusOr<D2hReceiver> Create(ChannelMaterial m, uint32_t engine = 0);

  // Message counters left on this IV space, `next` included (0 once spent).
  uint64_t remaining() const {
    return exhausted ? 0 : uint64_t{kLastMessageCounter} - next + 1;
  }
  // Follows the device's IV rotation of this engine's D2H slot
  // (RotateIvCommand): the next channel counter, the first message counter.
  // `device_channel` is the channel counter the device reported; anything but
  // this end's next one is refused (DATA_LOSS) and changes nothing.
  absl::Status Rotate(uint64_t device_channel);

  // Opens the D2H copy that answers `cmd` (a Read, or a Scrub's read-back)
  // into reply->data. A command naming another engine, anything else, or a
  // copy that does not authenticate for exactly what was asked (session,
  // buffer, offset, length, counter), is an error; the counter advances only
  // on success.
  absl::Status Open(const v1::DeviceCommand& cmd, uint64_t session_id,
                    const std::string& copy, v1::DeviceReply* reply);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_D2H_RECEIVER_H_
