#ifndef GPUTRAVEL_HOLDER_AGENT_PROVISION_FAULT_H_
#define GPUTRAVEL_HOLDER_AGENT_PROVISION_FAULT_H_

namespace gputravel {

// Trailing metadata of a failed Provision (proto/holder.proto): the agent,
// which is attested, says the write failed on the device path (the GPU's
// answers, or the way the host gives its TD to the GPU) while its own side
// (the dataset, the hand-off) did not. The orchestrator then does not charge
// the holder for it.
inline constexpr char kProvisionFaultKey[] = "gputravel-fault";
inline constexpr char kProvisionFaultDevice[] = "device";

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_PROVISION_FAULT_H_
