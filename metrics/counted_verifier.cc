#include "metrics/counted_verifier.h"

namespace gputravel {

CountedVerifier::CountedVerifier(Verifier* inner, MetricsRegistry* registry)
    : inner_(inner),
      failures_(registry->AddCounter(
          kAttestationFailuresMetric,
          "Evidence of a peer's TD that did not verify or did not meet this daemon's "
          "attestation policy.")) {}

absl::StatusOr<AttestedIdentity> CountedVerifier::Verify(const Evidence& evidence,
                                                         const ReportData& expected_report_data) {
  absl::StatusOr<AttestedIdentity> out = inner_->Verify(evidence, expected_report_data);
  if (!out.ok()) failures_.Add();
  return out;
}

}  // namespace gputravel
