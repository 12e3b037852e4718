#include "orchestrator/trip_steps.h"

namespace gputravel {

const std::vector<TripStepRule>& TripStepTable() {
  using S = TripStep;
  using R = TripRecovery;
  static const std::vector<TripStepRule>* const table = new std::vector<TripStepRule>{
      // Nothing has left the TD; a failure here fails the trip unstarted.
      {S::kPlanned, kStepPlanned, false, {S::kRouteOut}, R::kAbort},
      // A failed route out goes straight home.
      {S::kRouteOut, kStepRouteOut, false, {S::kProvision, S::kRouteBack}, R::kAbort},
      {S::kProvision, kStepProvision, false, {S::kRouteBack}, R::kAbort},
      {S::kRouteBack, kStepRouteBack, false, {S::kRekey}, R::kAbort},
      // The provisioning report's commit: train, or scrub (no trainer, a bad
      // window, a cancel).
      {S::kRekey, kStepRekey, false, {S::kTrain, S::kScrub}, R::kAbort},
      // Training's commit (with the checkpoint), or a failed training.
      {S::kTrain, kStepTrain, false, {S::kScrub}, R::kAbort},
      // Trained trips reach scrub with their checkpoint committed.
      {S::kScrub, kStepScrub, false, {}, R::kCountIfTrained},
      {S::kDone, kStepDone, true, {}, R::kNone},
      {S::kAborted, kStepAborted, true, {}, R::kNone},
  };
  return *table;
}

std::vector<TripStep> AllTripSteps() {
  std::vector<TripStep> out;
  for (const TripStepRule& r : TripStepTable()) out.push_back(r.step);
  return out;
}

const TripStepRule& RuleOf(TripStep step) {
  // The table is in enum order (trip_steps_test checks it).
  return TripStepTable()[static_cast<size_t>(step)];
}

const char* ToString(TripStep step) { return RuleOf(step).name; }

std::optional<TripStep> TripStepFromString(absl::string_view name) {
  for (const TripStepRule& r : TripStepTable()) {
    if (name == r.name) return r.step;
  }
  return std::nullopt;
}

bool IsFinal(TripStep step) { return RuleOf(step).final; }

bool CanCommitStep(TripStep from, TripStep to) {
  return !IsFinal(from) && !IsFinal(to) && static_cast<int>(to) >= static_cast<int>(from);
}

bool CanFinish(TripStep from) { return !IsFinal(from); }

bool AcceptsProvisioningReport(TripStep at) {
  return at == TripStep::kProvision || at == TripStep::kRouteBack || at == TripStep::kRekey;
}

TripStep StepAfterProvisioned(bool train) { return train ? TripStep::kTrain : TripStep::kScrub; }

TripStep StepAfterTrained() { return TripStep::kScrub; }

TripStep FinalStep(bool aborted) { return aborted ? TripStep::kAborted : TripStep::kDone; }

TripRecovery RecoveryFor(TripStep step) { return RuleOf(step).recovery; }

TripRecovery RecoveryFor(absl::string_view step) {
  std::optional<TripStep> s = TripStepFromString(step);
  return s.has_value() ? RecoveryFor(*s) : TripRecovery::kAbort;
}

namespace {

struct CampaignStateName {
  CampaignState state;
  const char* name;
};

constexpr CampaignStateName kCampaignStates[] = {
    {CampaignState::kCreated, kCampaignCreated},
    {CampaignState::kRunning, kCampaignRunning},
    {CampaignState::kPausing, kCampaignPausing},
    {CampaignState::kPaused, kCampaignPaused},
    {CampaignState::kCancelling, kCampaignCancelling},
    {CampaignState::kCompleted, kCampaignCompleted},
    {CampaignState::kFailed, kCampaignFailed},
    {CampaignState::kCancelled, kCampaignCancelled},
};

}  // namespace

std::vector<CampaignState> AllCampaignStates() {
  std::vector<CampaignState> out;
  for (const auto& s : kCampaignStates) out.push_back(s.state);
  return out;
}

const char* ToString(CampaignState state) {
  return kCampaignStates[static_cast<size_t>(state)].name;
}

std::optional<CampaignState> CampaignStateFromString(absl::string_view name) {
  for (const auto& s : kCampaignStates) {
    if (name == s.name) return s.state;
  }
  return std::nullopt;
}

bool IsTerminal(CampaignState state) {
  return state == CampaignState::kCompleted || state == CampaignState::kFailed ||
         state == CampaignState::kCancelled;
}

bool IsTerminalCampaignState(absl::string_view name) {
  std::optional<CampaignState> s = CampaignStateFromString(name);
  return s.has_value() && IsTerminal(*s);
}

bool CanMoveCampaign(CampaignState from, CampaignState to) {
  // A cancel is final once asked for: a trip that could not be made safe
  // leaves the campaign CANCELLING for recovery to finish, never PAUSED (a
  // resume would train it again).
  if (from == CampaignState::kCancelling) {
    return to == CampaignState::kCancelling || to == CampaignState::kCancelled;
  }
  return !IsTerminal(from) || from == to;
}

}  // namespace gputravel
