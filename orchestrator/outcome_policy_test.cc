#include "orchestrator/outcome_policy.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TripOutcome Ok() {
  TripOutcome o;
  o.ok = true;
  o.rekeyed = true;
  o.scrub_verified = true;
  o.trained = true;
  return o;
}

TripOutcome Failed(const std::string& error, bool holder_fault) {
  TripOutcome o;
  o.error = error;
  o.holder_fault = holder_fault;
  o.rekeyed = true;
  o.scrub_verified = true;
  return o;
}

TEST(OutcomePolicyTest, OkTripAdvancesTheCursor) {
  const TripFinish f = FinishFor(Ok(), 1234);
  EXPECT_EQ(f.outcome, kOutcomeOk);
  EXPECT_TRUE(f.advance_cursor);
  EXPECT_FALSE(f.fail_holder);
  EXPECT_TRUE(f.scrub_verified);
  EXPECT_TRUE(f.rekeyed);
  EXPECT_EQ(f.error, "");
  EXPECT_EQ(f.duration_us, 1234);
  EXPECT_EQ(DecideAfterTrip(Ok(), f, 7, "h1", HolderFailurePolicy::kPause).action,
            AfterTrip::Action::kContinue);
}

TEST(OutcomePolicyTest, CancelledTripIsAbortedAndLeavesTheHolderAlone) {
  TripOutcome o;
  o.cancelled = true;
  o.holder_fault = true;  // a cancelled call looks like the holder's; it is not
  o.scrub_verified = true;
  const TripFinish f = FinishFor(o, 0);
  EXPECT_EQ(f.outcome, kOutcomeAborted);
  EXPECT_EQ(f.error, "cancelled");
  EXPECT_FALSE(f.fail_holder);
  EXPECT_FALSE(f.advance_cursor);
  EXPECT_FALSE(f.rekeyed);
  o.error = "the campaign was cancelled";
  EXPECT_EQ(FinishFor(o, 0).error, "the campaign was cancelled");
  EXPECT_EQ(DecideAfterTrip(o, f, 7, "h1", HolderFailurePolicy::kPause).action,
            AfterTrip::Action::kContinue);
}

TEST(OutcomePolicyTest, HolderFaultFailsTheHolderAndSkipsOrPauses) {
  const TripOutcome o = Failed("digest mismatch", true);
  const TripFinish f = FinishFor(o, 5);
  EXPECT_EQ(f.outcome, kOutcomeFailed);
  EXPECT_TRUE(f.fail_holder);
  EXPECT_FALSE(f.advance_cursor);
  EXPECT_EQ(f.error, "digest mismatch");

  const AfterTrip skip = DecideAfterTrip(o, f, 7, "h1", HolderFailurePolicy::kSkip);
  EXPECT_EQ(skip.action, AfterTrip::Action::kSkipHolder);
  EXPECT_EQ(skip.message,
            "holder h1 failed and is skipped for the rest of the campaign (policy: skip): "
            "digest mismatch");
  const AfterTrip pause = DecideAfterTrip(o, f, 7, "h1", HolderFailurePolicy::kPause);
  EXPECT_EQ(pause.action, AfterTrip::Action::kPause);
  EXPECT_EQ(pause.message, "holder h1 failed (policy: pause): digest mismatch");
}

TEST(OutcomePolicyTest, OrchestratorSideFailurePausesWhateverThePolicy) {
  const TripOutcome o = Failed("GPU substitution detected: x", false);
  const TripFinish f = FinishFor(o, 5);
  EXPECT_EQ(f.outcome, kOutcomeFailed);
  EXPECT_FALSE(f.fail_holder);
  for (HolderFailurePolicy p : {HolderFailurePolicy::kSkip, HolderFailurePolicy::kPause}) {
    const AfterTrip a = DecideAfterTrip(o, f, 42, "h1", p);
    EXPECT_EQ(a.action, AfterTrip::Action::kPause);
    EXPECT_EQ(a.message, "trip 42 failed: GPU substitution detected: x");
  }
}

HolderRow Holder(const std::string& name, const std::string& state,
                 const std::string& error = "") {
  HolderRow h;
  h.name = name;
  h.state = state;
  h.error = error;
  return h;
}

TEST(OutcomePolicyTest, CompletionWithEveryHolder) {
  const Completion c = CompletionFor({Holder("a", kHolderDone), Holder("b", kHolderDone)});
  EXPECT_EQ(c.state, kCampaignCompleted);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.message, "every active holder did every round");
}

TEST(OutcomePolicyTest, CompletionNamesTheSkippedHolders) {
  const Completion c =
      CompletionFor({Holder("a", kHolderFailed, "timed out"), Holder("b", kHolderDone),
                     Holder("c", kHolderFailed, "refused")});
  EXPECT_EQ(c.state, kCampaignCompleted);
  EXPECT_EQ(c.error,
            "completed WITHOUT holders that failed and were skipped (their data did not "
            "train the model): a (timed out); c (refused)");
  EXPECT_EQ(c.message, c.error);
}

TEST(OutcomePolicyTest, EveryHolderFailedFailsTheCampaign) {
  const Completion c = CompletionFor({Holder("a", kHolderFailed, "x")});
  EXPECT_EQ(c.state, kCampaignFailed);
  EXPECT_EQ(c.error, "every holder failed; nothing was trained");
  EXPECT_EQ(c.message, c.error);
  EXPECT_EQ(CompletionFor({}).state, kCampaignFailed);
}

}  // namespace
}  // namespace gputravel
