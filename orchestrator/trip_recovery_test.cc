#include "orchestrator/trip_recovery.h"

#include <string>

#include "gtest/gtest.h"
#include "orchestrator/trip_steps.h"

namespace gputravel {
namespace {

// Every unfinished step's rule, as recovery applies it after making the GPU
// safe: only a trip whose training was committed counts.
TEST(TripRecoveryTest, FinishFollowsEachStepsRule) {
  for (const TripStepRule& r : TripStepTable()) {
    if (r.final) continue;
    for (bool trained : {false, true}) {
      TripRow t;
      t.id = 9;
      t.step = r.name;
      t.trained = trained;
      std::string message;
      const TripFinish f = RecoveredTripFinish(t, kCauseRestart, &message);
      EXPECT_TRUE(f.scrub_verified);
      EXPECT_TRUE(f.rekeyed);
      EXPECT_FALSE(f.fail_holder) << "recovery never blames the holder";
      const bool counts = r.recovery == TripRecovery::kCountIfTrained && trained;
      if (counts) {
        EXPECT_EQ(f.outcome, kOutcomeOk) << r.name;
        EXPECT_TRUE(f.advance_cursor);
        EXPECT_EQ(f.error, "");
        EXPECT_NE(message.find("counts as done"), std::string::npos) << message;
      } else {
        EXPECT_EQ(f.outcome, kOutcomeAborted) << r.name << " trained=" << trained;
        EXPECT_FALSE(f.advance_cursor);
        EXPECT_EQ(f.error, "interrupted at step " + std::string(r.name) +
                               " by an orchestrator restart; made safe (routed home, "
                               "re-keyed, scrubbed)");
        EXPECT_EQ(message, f.error + "; the window will be planned again");
      }
    }
  }
}

TEST(TripRecoveryTest, OnlyATrainedScrubCounts) {
  TripRow t;
  t.step = kStepScrub;
  t.trained = true;
  std::string message;
  EXPECT_EQ(RecoveredTripFinish(t, kCauseRestart, &message).outcome, kOutcomeOk);
  t.trained = false;
  EXPECT_EQ(RecoveredTripFinish(t, kCauseRestart, &message).outcome, kOutcomeAborted);
  t.step = kStepTrain;
  EXPECT_EQ(RecoveredTripFinish(t, kCauseRestart, &message).outcome, kOutcomeAborted);
}

// The events name what interrupted the trip, not always a restart.
TEST(TripRecoveryTest, TheEventNamesWhatInterruptedTheTrip) {
  TripRow t;
  t.id = 4;
  t.step = kStepProvision;
  std::string message;
  TripFinish f = RecoveredTripFinish(
      t, CauseUnsafe("MUX Route gpu0 -> orchestrator: connection refused"), &message);
  EXPECT_EQ(f.error,
            "interrupted at step provision by a failure to bring the GPU back to a safe state "
            "(MUX Route gpu0 -> orchestrator: connection refused); made safe (routed home, "
            "re-keyed, scrubbed)");
  EXPECT_EQ(message.find("restart"), std::string::npos) << message;
  f = RecoveredTripFinish(t, CauseStorage("database or disk is full"), &message);
  EXPECT_EQ(f.error,
            "interrupted at step provision by a failure to write the state database (database "
            "or disk is full); made safe (routed home, re-keyed, scrubbed)");
}

// A paused campaign's error stops saying its trip is unsafe once it is
// safe; the reason stays, and any other error is left alone.
TEST(TripRecoveryTest, MadeSafeErrorReplacesOnlyThatTripsUnsafeError) {
  const std::string unsafe = UnsafeTripError(12, "MUX Route gpu0 -> orchestrator: refused");
  EXPECT_EQ(unsafe,
            "trip 12 could not be made safe (recovery does it before anything else runs): "
            "MUX Route gpu0 -> orchestrator: refused");
  std::optional<std::string> safe = MadeSafeError(12, unsafe);
  ASSERT_TRUE(safe.has_value());
  EXPECT_EQ(*safe,
            "trip 12 failed (MUX Route gpu0 -> orchestrator: refused); recovery has since made "
            "it safe (routed home, re-keyed, scrubbed) and aborted it; resume the campaign to "
            "go on");
  EXPECT_EQ(safe->find("could not be made safe"), std::string::npos);
  EXPECT_FALSE(MadeSafeError(1, unsafe).has_value()) << "another trip's error";
  EXPECT_FALSE(MadeSafeError(12, "holder h failed").has_value());
}

}  // namespace
}  // namespace gputravel
