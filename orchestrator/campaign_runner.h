#ifndef GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_RUNNER_H_
#define GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_RUNNER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "keyxfer/attester.h"
#include "orchestrator/campaign_config.h"
#include "proto/orchestrator.pb.h"

namespace gputravel {

// Runs a campaign: asks every holder for its dataset size, plans windows of
// at most the buffer size (round-robin over holders, `rounds` passes), takes
// the GPU home, establishes the CC session and runs each trip. Trip ids are
// monotonic across restarts: the counter is persisted before a trip starts.
class CampaignRunner {
 public:
  CampaignRunner(const OrchestratorConfig* config, Attester* attester,
                 Verifier* verifier)
      : config_(config), attester_(attester), verifier_(verifier) {}

  // One campaign at a time; a concurrent call waits.
  v1::CampaignReport Run(const std::string& campaign);

 private:
  absl::StatusOr<uint64_t> NextTripId();

  const OrchestratorConfig* const config_;
  Attester* const attester_;
  Verifier* const verifier_;
  absl::Mutex mu_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_RUNNER_H_
