#include "holder_agent/holder_metrics.h"

#include <string>

namespace gputravel {

HolderMetrics::HolderMetrics(MetricsRegistry* registry)
    : provisions_(registry->AddCounter(
          "gputravel_holder_provisions_total",
          "Provision calls answered, by outcome: ok, refused (a hand-off refused before its "
          "keys were opened), failed (accepted, then the write or the report failed).",
          "outcome", {kProvisionOk, kProvisionRefused, kProvisionFailed})),
      bytes_(registry->AddCounter("gputravel_holder_provisioned_bytes_total",
                                  "Bytes of windows written to the GPU by ok provisions.")),
      seconds_(registry->AddHistogram(
          "gputravel_holder_provision_seconds",
          "Ok provisions, from the orchestrator's evidence check to the sealed report.",
          DurationBuckets())) {}

void HolderMetrics::Provision(const char* outcome, uint64_t bytes, double seconds) const {
  provisions_.Add(outcome);
  if (std::string(outcome) != kProvisionOk) return;
  bytes_.Add(static_cast<double>(bytes));
  seconds_.Observe(seconds);
}

}  // namespace gputravel
