#ifndef GPUTRAVEL_DEVICE_EXCHANGE_TRANSCRIPT_H_
#define GPUTRAVEL_DEVICE_EXCHANGE_TRANSCRIPT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "proto/device.pb.h"

namespace gputravel {

// The transcript a KeyExchange signature covers, as the device and the
// requester each compute it from the request and the response: serial, both
// ephemeral keys, both nonces, the session number, digests of the command
// that rode on the exchange and of the device's answer to it, and whether
// device memory survived (keyxfer/device_session.h). A relay that strips,
// splits, replaces or splices any of these makes the signature fail.
std::string ExchangeTranscript(absl::string_view serial, const v1::KeyExchangeRequest& request,
                               const v1::KeyExchangeResponse& response);

// Whether `keep` (opened from the request's prior_command) authorises
// exactly this exchange: it names the request's public key and nonce.
bool AuthorisesExchange(const v1::KeepMemory& keep, const v1::KeyExchangeRequest& request);

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_EXCHANGE_TRANSCRIPT_H_
