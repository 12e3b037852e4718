#include "orchestrator/trip_steps.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(TripStepsTest, TableIsInStepOrderAndNamesRoundTrip) {
  const auto& table = TripStepTable();
  ASSERT_EQ(table.size(), static_cast<size_t>(TripStep::kAborted) + 1)
      << "every TripStep has one row";
  std::set<std::string> names;
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(table[i].step), i) << table[i].name;
    EXPECT_TRUE(names.insert(table[i].name).second) << "duplicate name " << table[i].name;
    EXPECT_EQ(TripStepFromString(ToString(table[i].step)), table[i].step);
  }
  EXPECT_EQ(TripStepFromString("teleport"), std::nullopt);
  EXPECT_EQ(TripStepFromString(""), std::nullopt);
}

// The names the database has always stored: no schema change.
TEST(TripStepsTest, StoredNamesAreTheSchemas) {
  const std::vector<std::string> stored = {"planned", "route_out", "provision",
                                           "route_back", "rekey", "train",
                                           "scrub", "done", "aborted"};
  std::vector<std::string> names;
  for (TripStep s : AllTripSteps()) names.push_back(ToString(s));
  EXPECT_EQ(names, stored);
}

// Walks the table: from planned, following each step's next steps and
// FinishTrip's moves to the final steps, every step is reached.
TEST(TripStepsTest, EveryStepIsReachableFromPlanned) {
  std::set<TripStep> seen = {TripStep::kPlanned};
  std::vector<TripStep> todo = {TripStep::kPlanned};
  while (!todo.empty()) {
    const TripStep at = todo.back();
    todo.pop_back();
    std::vector<TripStep> moves = RuleOf(at).next;
    if (CanFinish(at)) {
      moves.push_back(FinalStep(false));
      moves.push_back(FinalStep(true));
    }
    for (TripStep to : moves) {
      if (seen.insert(to).second) todo.push_back(to);
    }
  }
  for (TripStep s : AllTripSteps()) {
    EXPECT_TRUE(seen.count(s)) << ToString(s) << " is not reachable from planned";
  }
}

// Every step has a recovery rule: a trip found there after a crash is
// finished one way or the other; only a finished trip needs none.
TEST(TripStepsTest, EveryStepHasARecoveryAction) {
  for (const TripStepRule& r : TripStepTable()) {
    if (r.final) {
      EXPECT_EQ(r.recovery, TripRecovery::kNone) << r.name;
      EXPECT_TRUE(r.next.empty()) << r.name << ": a finished trip moves no more";
    } else {
      EXPECT_NE(r.recovery, TripRecovery::kNone) << r.name << " has no recovery rule";
    }
    EXPECT_EQ(RecoveryFor(r.name), r.recovery);
  }
  // Only a trip whose training was committed counts when recovered.
  EXPECT_EQ(RecoveryFor(TripStep::kScrub), TripRecovery::kCountIfTrained);
  EXPECT_EQ(RecoveryFor(TripStep::kTrain), TripRecovery::kAbort);
  EXPECT_EQ(RecoveryFor("teleport"), TripRecovery::kAbort);
}

TEST(TripStepsTest, NextStepsAreForwardCommits) {
  for (const TripStepRule& r : TripStepTable()) {
    for (TripStep to : r.next) {
      EXPECT_TRUE(CanCommitStep(r.step, to)) << r.name << " -> " << ToString(to);
    }
  }
  // The store's rule: forward only, a retry repeats the step, steps may be
  // skipped, final steps are FinishTrip's.
  EXPECT_TRUE(CanCommitStep(TripStep::kRouteOut, TripStep::kRouteOut));
  EXPECT_TRUE(CanCommitStep(TripStep::kRekey, TripStep::kScrub));
  EXPECT_FALSE(CanCommitStep(TripStep::kRouteBack, TripStep::kProvision));
  EXPECT_FALSE(CanCommitStep(TripStep::kScrub, TripStep::kDone));
  EXPECT_FALSE(CanCommitStep(TripStep::kDone, TripStep::kScrub));
  EXPECT_FALSE(CanFinish(TripStep::kAborted));
  EXPECT_TRUE(CanFinish(TripStep::kPlanned));
}

TEST(TripStepsTest, ReportAndTrainingMoves) {
  std::vector<TripStep> reporting;
  for (TripStep s : AllTripSteps()) {
    if (AcceptsProvisioningReport(s)) reporting.push_back(s);
  }
  EXPECT_EQ(reporting, (std::vector<TripStep>{TripStep::kProvision, TripStep::kRouteBack,
                                              TripStep::kRekey}));
  for (TripStep at : reporting) {
    EXPECT_TRUE(CanCommitStep(at, StepAfterProvisioned(true)));
    EXPECT_TRUE(CanCommitStep(at, StepAfterProvisioned(false)));
  }
  EXPECT_EQ(StepAfterProvisioned(true), TripStep::kTrain);
  EXPECT_EQ(StepAfterProvisioned(false), TripStep::kScrub);
  EXPECT_TRUE(CanCommitStep(kStepOfTraining, StepAfterTrained()));
  EXPECT_EQ(StepAfterTrained(), TripStep::kScrub);
  EXPECT_EQ(FinalStep(true), TripStep::kAborted);
  EXPECT_EQ(FinalStep(false), TripStep::kDone);
}

TEST(TripStepsTest, CampaignStates) {
  const std::vector<std::string> stored = {"created",    "running",   "pausing",
                                           "paused",     "cancelling", "completed",
                                           "failed",     "cancelled"};
  std::vector<std::string> names;
  for (CampaignState s : AllCampaignStates()) {
    names.push_back(ToString(s));
    EXPECT_EQ(CampaignStateFromString(ToString(s)), s);
  }
  EXPECT_EQ(names, stored);
  EXPECT_EQ(CampaignStateFromString("sleeping"), std::nullopt);
  EXPECT_TRUE(IsTerminalCampaignState("completed"));
  EXPECT_TRUE(IsTerminalCampaignState("cancelled"));
  EXPECT_FALSE(IsTerminalCampaignState("cancelling"));
  EXPECT_FALSE(IsTerminalCampaignState("pausing"));
  EXPECT_FALSE(IsTerminalCampaignState("sleeping"));
  EXPECT_TRUE(CanMoveCampaign(CampaignState::kRunning, CampaignState::kPaused));
  EXPECT_TRUE(CanMoveCampaign(CampaignState::kFailed, CampaignState::kFailed));
  EXPECT_FALSE(CanMoveCampaign(CampaignState::kCompleted, CampaignState::kRunning));
  EXPECT_TRUE(CanMoveCampaign(CampaignState::kCancelling, CampaignState::kCancelled));
  EXPECT_FALSE(CanMoveCampaign(CampaignState::kCancelling, CampaignState::kPaused));
  EXPECT_FALSE(CanMoveCampaign(CampaignState::kCancelling, CampaignState::kRunning));
}

}  // namespace
}  // namespace gputravel
