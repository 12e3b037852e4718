#ifndef GPUTRAVEL_ORCHESTRATOR_HOLDER_CHANNEL_H_
#define GPUTRAVEL_ORCHESTRATOR_HOLDER_CHANNEL_H_

// Opening the mutually attested channel with a holder's agent: its
// OpenChannel call, then the verification of its evidence and our own half
// (keyxfer/attested_channel.h). A trip's hand-off rides on it; a preflight
// opens one and drops it.

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/attester.h"
#include "proto/holder.grpc.pb.h"

namespace gputravel {

// An attested channel with one holder, not used for a hand-off yet.
struct PreparedChannel {
  std::string holder;
  std::string channel_id;
  AttestedChannel channel;
  Evidence own_evidence;
  std::chrono::steady_clock::time_point opened;
};

// Opens the channel with holder `holder_name` behind `stub` (whose TLS
// channel requires that holder's certificate). `who` names it in errors
// ("holder h1"): "<who> OpenChannel: ..." when the call fails,
// "<who>: ..." when its evidence does not verify or meet `verifier`'s
// policy. `on_call` (may be null) is handed the call's context while it runs
// and null after (to cancel it from another thread). `*call_failed` (may be
// null) says whether the call itself failed, as opposed to the evidence.
absl::StatusOr<PreparedChannel> OpenHolderChannel(
    v1::HolderAgent::Stub* stub, const std::string& holder_name, const std::string& who,
    double timeout_seconds, Verifier& verifier, Attester& attester,
    const std::function<void(grpc::ClientContext*)>& on_call, bool* call_failed);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_HOLDER_CHANNEL_H_
