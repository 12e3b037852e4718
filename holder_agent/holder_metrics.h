#ifndef GPUTRAVEL_HOLDER_AGENT_HOLDER_METRICS_H_
#define GPUTRAVEL_HOLDER_AGENT_HOLDER_METRICS_H_

// The holder agent's metrics (docs/operations.md, Metrics): what its
// Provision calls came to, in counts, bytes and seconds, never a campaign,
// an orchestrator, a trip or a window. The orchestrator's API shows each
// trip's outcome, bytes and provisioning time already. Attestation failures
// (the orchestrator's evidence refused) are counted around the verifier
// (metrics/counted_verifier.h).

#include <cstdint>

#include "metrics/metrics_registry.h"

namespace gputravel {

// Outcomes of a Provision.
inline constexpr char kProvisionOk[] = "ok";  // window written, report sent
// Refused before its keys were opened: an unknown or used channel, the
// orchestrator's evidence, the binding (another holder, a stale trip, a
// window outside the dataset, terms the policy refuses), a cancel while
// waiting.
inline constexpr char kProvisionRefused[] = "refused";
// Accepted, then the write or the report failed (or the caller left).
inline constexpr char kProvisionFailed[] = "failed";

class HolderMetrics {
 public:
  // Registers the families in `registry` (which must outlive this).
  explicit HolderMetrics(MetricsRegistry* registry);

  // One Provision answered with `outcome`; `bytes` written and `seconds`
  // from the evidence check to the sealed report, for an ok one.
  void Provision(const char* outcome, uint64_t bytes, double seconds) const;

 private:
  const MetricCounter provisions_;
  const MetricCounter bytes_;
  const MetricHistogram seconds_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_HOLDER_METRICS_H_
