#ifndef GPUTRAVEL_ORCHESTRATOR_OUTCOME_POLICY_H_
#define GPUTRAVEL_ORCHESTRATOR_OUTCOME_POLICY_H_

// What a trip's outcome does to its holder and its campaign: pure functions
// of the outcome, the campaign's holder-failure policy and its holders'
// persisted states, so the engine's worker loop only carries them out.

#include <cstdint>
#include <string>
#include <vector>

#include "orchestrator/campaign_spec.h"
#include "orchestrator/state_store.h"
#include "orchestrator/trip_runner.h"

namespace gputravel {

// How the trip is finished in the store (FinishTrip): ok trips advance their
// holder's cursor; a cancelled trip is aborted (holder untouched); any other
// failure is failed, and takes the holder out of the campaign when it was
// the holder's fault.
TripFinish FinishFor(const TripOutcome& outcome, int64_t duration_us);

// What the campaign does after a trip that `finish` (FinishFor) recorded.
struct AfterTrip {
  enum class Action {
    kContinue,    // the next trip
    kSkipHolder,  // the holder failed and is dropped (policy skip): an ERROR
                  // event with `message`, then the next trip
    kPause,       // the campaign PAUSES with `message` as its error
  };
  Action action = Action::kContinue;
  std::string message;
};
// A failure charged to the holder (TripFault::kHolder: on evidence) pauses
// or skips the holder per `policy`; any other failure pauses, naming whose
// side it was (the host's, or undetermined, where an operator resumes or
// skips the holder).
AfterTrip DecideAfterTrip(const TripOutcome& outcome, const TripFinish& finish,
                          uint64_t trip, const std::string& holder,
                          HolderFailurePolicy policy);

// The campaign's final state once no active holder has anything left:
// completed if at least one holder finished (saying in `error` which holders
// failed or were skipped, so their data did not train the model), failed
// if every holder failed.
struct Completion {
  std::string state;  // kCampaignCompleted or kCampaignFailed
  std::string error;  // "" for a completion with every holder
  std::string message;
};
Completion CompletionFor(const std::vector<HolderRow>& holders);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_OUTCOME_POLICY_H_
