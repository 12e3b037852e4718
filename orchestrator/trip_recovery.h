#ifndef GPUTRAVEL_ORCHESTRATOR_TRIP_RECOVERY_H_
#define GPUTRAVEL_ORCHESTRATOR_TRIP_RECOVERY_H_

// Crash recovery (docs/protocol.md section 5): every unfinished trip of a
// GPU's campaigns is brought to a safe state (route home with a fresh
// fencing token, fresh key agreement, scrub and verify) and finished as its
// step's rule in orchestrator/trip_steps.h says.

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/campaign_spec.h"
#include "orchestrator/state_store.h"
#include "orchestrator/trip_runner.h"

namespace gputravel {

// How recovery finishes trip `t` once the GPU is safe (re-keyed, buffer
// scrubbed and verified): per RecoveryFor(t.step), ok with the cursor
// advanced for a trip whose training was committed, else aborted (the
// window is planned again). `event_message`: the RECOVERY event's message.
TripFinish RecoveredTripFinish(const TripRow& t, std::string* event_message);

// The campaign's validated spec from its row.
using SpecOfFn = std::function<absl::StatusOr<CampaignSpec>(const CampaignRow&)>;

// Brings the unfinished trips of campaigns on GPU `gpu` to a safe state with
// `runner` and finishes them; then moves campaigns of the GPU that were
// CANCELLING to CANCELLED. False if a trip could not be made safe (or its
// campaign not read): the GPU is unusable until a later call succeeds.
bool RecoverTrips(const std::string& gpu, StateStore* store, TripRunner* runner,
                  const SpecOfFn& spec_of, const CommitNotifier& notify);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_TRIP_RECOVERY_H_
