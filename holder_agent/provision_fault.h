#ifndef GPUTRAVEL_HOLDER_AGENT_PROVISION_FAULT_H_
#define GPUTRAVEL_HOLDER_AGENT_PROVISION_FAULT_H_

namespace gputravel {

// Trailing metadata of a failed Provision (proto/holder.proto): the agent,
// whose answers reach the orchestrator over mTLS under its own certificate
// (the host relays them but cannot forge them), says whose side failed.
// "holder": its own side refused (its training policy, a hand-off for
// another holder, no freshness record configured; not a window outside its
// dataset, whose file lies on the host's disk); the orchestrator applies the
// campaign's holder-failure policy. "device": its write to the GPU failed
// while its own side did not (the GPU's answers, or the way the host gives
// its TD to the GPU); the host's side is charged. Without the key nobody is
// charged (orchestrator/trip_runner.h TripFault).
inline constexpr char kProvisionFaultKey[] = "gputravel-fault";
inline constexpr char kProvisionFaultHolder[] = "holder";
inline constexpr char kProvisionFaultDevice[] = "device";

// Whose side a failed Provision blames (the value it sends, if any).
enum class ProvisionFault { kNone, kHolder, kDevice };

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_PROVISION_FAULT_H_
