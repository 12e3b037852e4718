#ifndef GPUTRAVEL_TESTS_REPLAYED_HANDOFF_H_
#define GPUTRAVEL_TESTS_REPLAYED_HANDOFF_H_

// A hand-off for a trip the holder agent was already handed, sent again by
// the stack's own orchestrator identity (P5 freshness): what an orchestrator
// whose state was rolled back, or a copy of it, could send. The test plays
// the orchestrator with everything the deployment gave it: its TLS
// certificate, its development attestation key, and evidence measured as
// the orchestrator's binary and configuration (so the agent's attestation
// policy accepts it). It opens a new attested channel to the agent, as the
// orchestrator does for each trip (a channel is single-use, so a replay is
// always a new channel with an old trip), and sends the trip's binding with
// keys of its own wrapped for it. Only freshness should refuse it.

#include "absl/status/statusor.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "proto/holder.pb.h"
#include "proto/orchestrator.pb.h"

namespace gputravel {

// The binding of `trip` (campaign, id, holder, window, GPU session, as the
// campaign reports the trip; the stack's GPU serial) with what the campaign
// shares among its hand-offs taken from `like`, another hand-off of the
// same campaign (buffer, chunk size, terms, number of lanes); its lanes
// planned over the window as the orchestrator plans them (PlanLanes' error
// if they cannot be).
absl::StatusOr<v1::HandoffBinding> ReplayedBinding(const v1::Trip& trip,
                                                   const v1::HandoffBinding& like);

// Sends `binding` to its holder's agent as the stack's orchestrator, on a
// new attested channel; the agent's answer to Provision (an error of the
// test's side, e.g. the channel, as INTERNAL naming the step).
grpc::Status ReplayHandoff(EmulatedStack* stack, const v1::HandoffBinding& binding);

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_REPLAYED_HANDOFF_H_
