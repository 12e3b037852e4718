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
      const TripFinish f = RecoveredTripFinish(t, &message);
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
  EXPECT_EQ(RecoveredTripFinish(t, &message).outcome, kOutcomeOk);
  t.trained = false;
  EXPECT_EQ(RecoveredTripFinish(t, &message).outcome, kOutcomeAborted);
  t.step = kStepTrain;
  EXPECT_EQ(RecoveredTripFinish(t, &message).outcome, kOutcomeAborted);
}

}  // namespace
}  // namespace gputravel
