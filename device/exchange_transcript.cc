#include "device/exchange_transcript.h"

#include <openssl/crypto.h>

#include "keyxfer/device_session.h"
#include "keyxfer/hkdf.h"
#include "keyxfer/wire.h"

namespace gputravel {
namespace {

// Equal lengths and contents, in time independent of the contents.
bool SameBytes(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string ExchangeTranscript(absl::string_view serial, const v1::KeyExchangeRequest& request,
                               const v1::KeyExchangeResponse& response) {
  ExchangeBinding b;
  if (request.has_prior_command()) {
    // The counter is advisory (the receiver opens at its own): not bound.
    WireWriter command;
    command.Bytes("gputravel-exchange-prior-command");
    command.U64(request.prior_command().session_id());
    command.Bytes(request.prior_command().ciphertext());
    b.prior_command_digest = Sha384(command.Take());
    WireWriter answer;
    answer.Bytes("gputravel-exchange-prior-answer");
    answer.U32(response.has_prior_reply() ? 1 : 0);
    answer.U64(response.prior_reply().session_id());
    answer.Bytes(response.prior_reply().ciphertext());
    answer.Bytes(response.prior_reply().d2h_copy());
    answer.U32(static_cast<uint32_t>(response.prior_error_code()));
    answer.Bytes(response.prior_error());
    b.prior_answer_digest = Sha384(answer.Take());
  }
  b.memory_kept = response.memory_kept();
  return DeviceSessionTranscript(serial, request.requester_public_key(),
                                 request.requester_nonce(), response.device_public_key(),
                                 response.device_nonce(), response.session_id(), b);
}

bool AuthorisesExchange(const v1::KeepMemory& keep, const v1::KeyExchangeRequest& request) {
  return !keep.requester_public_key().empty() &&
         SameBytes(keep.requester_public_key(), request.requester_public_key()) &&
         SameBytes(keep.requester_nonce(), request.requester_nonce());
}

}  // namespace gputravel
