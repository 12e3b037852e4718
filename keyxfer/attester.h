#ifndef GPUTRAVEL_KEYXFER_ATTESTER_H_
#define GPUTRAVEL_KEYXFER_ATTESTER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/attestation.pb.h"

namespace gputravel {

using Evidence = v1::Evidence;

// 64 bytes a requester binds into evidence (TDX REPORTDATA).
using ReportData = std::array<uint8_t, 64>;

// Produces evidence about the trust domain this process runs in.
// Implementations: DevAttester (software-signed, development only) and the TDX
// attester (configfs-tsm quotes). Thread-safe.
class Attester {
 public:
  virtual ~Attester() = default;
  // Evidence whose report data equals `report_data`.
  virtual absl::StatusOr<Evidence> Attest(const ReportData& report_data) = 0;
};

// What a verifier learned from evidence that verified and matched policy.
struct AttestedIdentity {
  std::string format;                // Evidence.format
  std::vector<uint8_t> mrtd;         // 48 bytes
  std::vector<std::vector<uint8_t>> rtmr;  // RTMR0..3, 48 bytes each
  uint64_t td_attributes = 0;
  std::vector<uint8_t> tee_tcb_svn;  // 16 bytes
  // TDX with Intel's collateral configured: the TCB status the collateral
  // gives, the advisory IDs of the matched levels and the collateral's
  // dates (Unix seconds: oldest issue, earliest nextUpdate). Empty/zero
  // when the backend evaluated no TCB.
  std::string tcb_status;
  std::vector<std::string> advisory_ids;
  int64_t collateral_issued_unix = 0;
  int64_t collateral_next_update_unix = 0;
};

// Checks evidence: authenticity (signatures, certificate chain), that its report
// data equals `expected_report_data` (binding to the channel and fresh nonces),
// and the policy (measurements, DEBUG attribute, minimum TCB). Errors name the
// check that failed and, for policy, the field, expected and actual values.
class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual absl::StatusOr<AttestedIdentity> Verify(
      const Evidence& evidence, const ReportData& expected_report_data) = 0;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_ATTESTER_H_
