#include "orchestrator/holder_channel.h"

#include "util/grpc_status.h"

namespace gputravel {

absl::StatusOr<PreparedChannel> OpenHolderChannel(
    v1::HolderAgent::Stub* stub, const std::string& holder_name, const std::string& who,
    double timeout_seconds, Verifier& verifier, Attester& attester,
    const std::function<void(grpc::ClientContext*)>& on_call, bool* call_failed) {
  if (call_failed != nullptr) *call_failed = false;
  auto initiator = ChannelInitiator::Create();
  if (!initiator.ok()) return initiator.status();
  v1::OpenChannelRequest req;
  req.set_orchestrator_public_key(initiator->public_key());
  req.set_orchestrator_nonce(initiator->nonce());
  v1::OpenChannelResponse resp;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(timeout_seconds));
    if (on_call) on_call(&ctx);
    absl::Status s = FromGrpc(stub->OpenChannel(&ctx, req, &resp), who + " OpenChannel");
    if (on_call) on_call(nullptr);
    if (!s.ok()) {
      if (call_failed != nullptr) *call_failed = true;
      return s;
    }
  }
  PreparedChannel out;
  out.holder = holder_name;
  out.channel_id = resp.channel_id();
  auto channel = initiator->Complete(resp.holder_public_key(), resp.holder_nonce(),
                                     resp.evidence(), verifier, attester, &out.own_evidence);
  if (!channel.ok()) {
    return absl::Status(channel.status().code(),
                        who + ": " + std::string(channel.status().message()));
  }
  out.channel = std::move(*channel);
  out.opened = std::chrono::steady_clock::now();
  return out;
}

}  // namespace gputravel
