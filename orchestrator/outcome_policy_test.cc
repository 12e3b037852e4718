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

TripOutcome Failed(const std::string& error, TripFault fault) {
  TripOutcome o;
  o.error = error;
  o.fault = fault;
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
  o.fault = TripFault::kHolder;  // a cancelled call looks like the holder's; it is not
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
  const TripOutcome o = Failed("digest mismatch", TripFault::kHolder);
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
  const TripOutcome o = Failed("committing: disk full", TripFault::kNone);
  const TripFinish f = FinishFor(o, 5);
  EXPECT_EQ(f.outcome, kOutcomeFailed);
  EXPECT_FALSE(f.fail_holder);
  for (HolderFailurePolicy p : {HolderFailurePolicy::kSkip, HolderFailurePolicy::kPause}) {
    const AfterTrip a = DecideAfterTrip(o, f, 42, "h1", p);
    EXPECT_EQ(a.action, AfterTrip::Action::kPause);
    EXPECT_EQ(a.message, "trip 42 failed: committing: disk full");
  }
}

// The host's side (the device path, the route) and failures that leave no
// evidence never charge the holder, whatever the policy: skipping would let
// the host choose whose data trains the model.
TEST(OutcomePolicyTest, HostOrUndeterminedFailureNeverChargesTheHolder) {
  for (TripFault fault : {TripFault::kHost, TripFault::kUndetermined}) {
    const TripOutcome o = Failed("x", fault);
    const TripFinish f = FinishFor(o, 5);
    EXPECT_EQ(f.outcome, kOutcomeFailed);
    EXPECT_FALSE(f.fail_holder) << TripFaultName(fault);
    for (HolderFailurePolicy p : {HolderFailurePolicy::kSkip, HolderFailurePolicy::kPause}) {
      const AfterTrip a = DecideAfterTrip(o, f, 42, "h1", p);
      EXPECT_EQ(a.action, AfterTrip::Action::kPause) << TripFaultName(fault);
      EXPECT_NE(a.message.find("h1 is not charged"), std::string::npos) << a.message;
    }
  }
  const TripOutcome host = Failed("x", TripFault::kHost);
  EXPECT_EQ(DecideAfterTrip(host, FinishFor(host, 0), 42, "h1", HolderFailurePolicy::kSkip)
                .message,
            "trip 42 failed on the host's side (the GPU or its route; holder h1 is not "
            "charged): x");
  const TripOutcome unknown = Failed("x", TripFault::kUndetermined);
  EXPECT_NE(DecideAfterTrip(unknown, FinishFor(unknown, 0), 42, "h1", HolderFailurePolicy::kSkip)
                .message.find("gputravel skip"),
            std::string::npos);
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
            "completed WITHOUT holders that failed or were skipped (their data did not "
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
