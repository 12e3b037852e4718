#ifndef GPUTRAVEL_ORCHESTRATOR_TRIP_RECOVERY_H_
#define GPUTRAVEL_ORCHESTRATOR_TRIP_RECOVERY_H_

// Crash recovery (docs/protocol.md section 5): every unfinished trip of a
// GPU's campaigns is brought to a safe state (route home with a fresh
// fencing token, fresh key agreement, scrub and verify) and finished as its
// step's rule in orchestrator/trip_steps.h says.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/campaign_spec.h"
#include "orchestrator/state_store.h"
#include "orchestrator/trip_runner.h"

namespace gputravel {

// What left the trips that recovery finds unfinished, named in their
// RECOVERY events ("interrupted at step S by CAUSE").
inline constexpr char kCauseRestart[] = "an orchestrator restart";
// A trip the worker could not make safe (`reason`: why).
std::string CauseUnsafe(const std::string& reason);
// The state database could not be written (`error`: the storage error).
std::string CauseStorage(const std::string& error);

// How recovery finishes trip `t` once the GPU is safe (re-keyed, buffer
// scrubbed and verified): per RecoveryFor(t.step), ok with the cursor
// advanced for a trip whose training was committed, else aborted (the
// window is planned again). `cause`: what interrupted it (kCause*).
// `event_message`: the RECOVERY event's message.
TripFinish RecoveredTripFinish(const TripRow& t, const std::string& cause,
                               std::string* event_message);

// The campaign error of trip `trip` that could not be made safe
// (`reason`: why), which pauses its campaign.
std::string UnsafeTripError(uint64_t trip, const std::string& reason);
// If `error` is UnsafeTripError(trip, ...): what it becomes once recovery
// has made that trip safe (its reason kept, the claim that it is unsafe
// gone); nullopt for any other error, which stays.
std::optional<std::string> MadeSafeError(uint64_t trip, const std::string& error);

// The campaign's validated spec from its row.
using SpecOfFn = std::function<absl::StatusOr<CampaignSpec>(const CampaignRow&)>;

// Brings the unfinished trips of campaigns on GPU `gpu` to a safe state with
// `runner` and finishes them, their events naming `cause` (kCause*); a
// PAUSED campaign whose error said the trip could not be made safe gets
// MadeSafeError instead. Then moves campaigns of the GPU that were
// CANCELLING to CANCELLED. False if a trip could not be made safe, its
// campaign not read or its finish not committed: the GPU is unusable until
// a later call succeeds.
bool RecoverTrips(const std::string& gpu, StateStore* store, TripRunner* runner,
                  const SpecOfFn& spec_of, const CommitNotifier& notify,
                  const std::string& cause = kCauseRestart);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_TRIP_RECOVERY_H_
