#ifndef GPUTRAVEL_ORCHESTRATOR_ATTESTATION_RECORD_H_
#define GPUTRAVEL_ORCHESTRATOR_ATTESTATION_RECORD_H_

// What the orchestrator verified of a holder's TD, as it is recorded with
// each trip and shown on the holder's status (proto VerifiedAttestation).

#include <cstdint>
#include <string>

#include "keyxfer/attester.h"
#include "proto/orchestrator.pb.h"

namespace gputravel {

v1::VerifiedAttestation RecordOf(const AttestedIdentity& peer, int64_t verified_unix_ms);

// Whether two records say the same of the TD (everything but the time).
bool SameAttestation(const v1::VerifiedAttestation& a, const v1::VerifiedAttestation& b);

// One line for logs: "tdx mrtd 1a2b3c4d... rtmr3 ... TCB UpToDate
// (collateral issued 2025-06-01, next update 2025-07-01)".
std::string DescribeAttestation(const v1::VerifiedAttestation& a);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_ATTESTATION_RECORD_H_
