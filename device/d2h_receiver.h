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
  uint32_t next = kFirstMessageCounter;
  bool exhausted = false;

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
