#ifndef GPUTRAVEL_ORCHESTRATOR_TRIP_STEPS_H_
#define GPUTRAVEL_ORCHESTRATOR_TRIP_STEPS_H_

// The trip as a state machine, and a campaign's lifecycle states: the one
// place that names the steps, says how a trip may move between them, and
// what crash recovery does with a trip found at each. The store
// (state_store), the runner (trip_runner), recovery (trip_recovery), the API
// (orchestrator_service) and docs/protocol.md section 5 follow this table.
//
// A trip's step is committed BEFORE its side effect (P7), so the persisted
// step names the side effect that may have been half done at a crash.
// The database stores the step's name (ToString), unchanged since the
// schema's first version.

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"

namespace gputravel {

// Trip steps' stored names.
inline constexpr char kStepPlanned[] = "planned";
inline constexpr char kStepRouteOut[] = "route_out";
inline constexpr char kStepProvision[] = "provision";
inline constexpr char kStepRouteBack[] = "route_back";
inline constexpr char kStepRekey[] = "rekey";
inline constexpr char kStepTrain[] = "train";
inline constexpr char kStepScrub[] = "scrub";
inline constexpr char kStepDone[] = "done";
inline constexpr char kStepAborted[] = "aborted";

// Trip steps, in the order a trip moves through them (ARCHITECTURE.md §4):
// the order is what "forward" means. kDone and kAborted are final and only
// FinishTrip sets them.
enum class TripStep {
  kPlanned,    // committed; channel with the holder opened, nothing left the TD
  kRouteOut,   // the GPU is routed to the holder (counter window recorded)
  kProvision,  // hand-off and the holder's Provision stream
  kRouteBack,  // the GPU is routed home
  kRekey,      // same-session check with the read-back, fresh key agreement
  kTrain,      // training on the window
  kScrub,      // zeroing and verifying the buffer
  kDone,       // finished ok or failed
  kAborted,    // finished aborted (cancel, shutdown, crash recovery)
};

// What crash recovery does with a trip found unfinished at a step. Every
// recovery first makes the GPU safe: route home with a fresh fencing token,
// fresh key agreement (the holder's key dies), scrub and verify the buffer.
enum class TripRecovery {
  kNone,             // a final step: nothing pending
  kAbort,            // finish aborted; the window is planned again
  kCountIfTrained,   // training was committed with the checkpoint: finish ok
                     // and advance the cursor; else as kAbort
};

// One row of the table.
struct TripStepRule {
  TripStep step;
  const char* name;  // stored in the database and the event log
  bool final;
  // The steps a trip goes to next on its paths (success, failure, skipped
  // training) by SetTripStep, RecordProvisioned or RecordTrained; a final
  // step is reached from any other one by FinishTrip.
  std::vector<TripStep> next;
  TripRecovery recovery;
};

// The table, one row per step, in order.
const std::vector<TripStepRule>& TripStepTable();
// Every step, in order.
std::vector<TripStep> AllTripSteps();
// The row of `step`.
const TripStepRule& RuleOf(TripStep step);

// The stored name, and back (nullopt for a name that is not a step).
const char* ToString(TripStep step);
std::optional<TripStep> TripStepFromString(absl::string_view name);
bool IsFinal(TripStep step);

// Whether a commit may move a trip at `from` to the non-final step `to`.
// Steps only move forward (repeating the current one is a retry; a path may
// skip steps, e.g. route_out -> route_back when routing out failed, rekey ->
// scrub without a trainer); final steps are FinishTrip's alone.
bool CanCommitStep(TripStep from, TripStep to);
// Whether FinishTrip may finish a trip at `from` (any step not final).
bool CanFinish(TripStep from);
// The holder's provisioning report is recorded at steps provision..rekey.
bool AcceptsProvisioningReport(TripStep at);
// The step the provisioning report's commit moves the trip to: train when
// the window is good and a trainer waits, else scrub.
TripStep StepAfterProvisioned(bool train);
// Training is recorded at kTrain, and its commit moves the trip to this step.
inline constexpr TripStep kStepOfTraining = TripStep::kTrain;
TripStep StepAfterTrained();
// The step a trip is finished at: kAborted for an aborted one, else kDone.
TripStep FinalStep(bool aborted);

// What recovery does with a trip found at `step`; kAbort for a name that is
// not a step.
TripRecovery RecoveryFor(TripStep step);
TripRecovery RecoveryFor(absl::string_view step);

// Campaign states' stored names.
inline constexpr char kCampaignCreated[] = "created";
inline constexpr char kCampaignRunning[] = "running";
inline constexpr char kCampaignPausing[] = "pausing";
inline constexpr char kCampaignPaused[] = "paused";
inline constexpr char kCampaignCancelling[] = "cancelling";
inline constexpr char kCampaignCompleted[] = "completed";
inline constexpr char kCampaignFailed[] = "failed";
inline constexpr char kCampaignCancelled[] = "cancelled";

// A campaign's lifecycle. Terminal: completed, failed, cancelled.
enum class CampaignState {
  kCreated,
  kRunning,
  kPausing,  // asked to pause; the trip in flight is being finished safely
  kPaused,
  kCancelling,  // a trip is being made safe; then cancelled
  kCompleted,
  kFailed,
  kCancelled,
};

std::vector<CampaignState> AllCampaignStates();
const char* ToString(CampaignState state);
std::optional<CampaignState> CampaignStateFromString(absl::string_view name);
bool IsTerminal(CampaignState state);
// A stored name of a terminal state (false for an unknown name).
bool IsTerminalCampaignState(absl::string_view name);
// The store's rule: any state may become any other, except that a terminal
// campaign can only be set to the same state again and a cancelling one
// only becomes cancelled.
bool CanMoveCampaign(CampaignState from, CampaignState to);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_TRIP_STEPS_H_
