#ifndef GPUTRAVEL_METRICS_COUNTED_VERIFIER_H_
#define GPUTRAVEL_METRICS_COUNTED_VERIFIER_H_

// Attestation failures as a metric: a Verifier that passes every evidence to
// the daemon's own verifier and counts the refusals. A daemon with metrics
// hands this to whatever verifies a peer's TD, so every verification, on
// every path, is counted in one place.

#include "keyxfer/attester.h"
#include "metrics/metrics_registry.h"

namespace gputravel {

// gputravel_attestation_failures_total: evidence of a peer's TD that did
// not verify or did not meet the policy.
inline constexpr char kAttestationFailuresMetric[] = "gputravel_attestation_failures_total";

class CountedVerifier final : public Verifier {
 public:
  // `inner` (not owned) decides; registers kAttestationFailuresMetric in
  // `registry`.
  CountedVerifier(Verifier* inner, MetricsRegistry* registry);

  // `inner`'s answer, unchanged.
  absl::StatusOr<AttestedIdentity> Verify(const Evidence& evidence,
                                          const ReportData& expected_report_data) override;

 private:
  Verifier* const inner_;
  const MetricCounter failures_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_METRICS_COUNTED_VERIFIER_H_
