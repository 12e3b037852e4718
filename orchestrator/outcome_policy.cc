#include "orchestrator/outcome_policy.h"

namespace gputravel {

TripFinish FinishFor(const TripOutcome& outcome, int64_t duration_us) {
  TripFinish f;
  f.scrub_verified = outcome.scrub_verified;
  f.rekeyed = outcome.rekeyed;
  f.error = outcome.error;
  f.duration_us = duration_us;
  if (outcome.ok) {
    f.outcome = kOutcomeOk;
    f.advance_cursor = true;
  } else if (outcome.cancelled) {
    f.outcome = kOutcomeAborted;
    if (f.error.empty()) f.error = "cancelled";
  } else {
    f.outcome = kOutcomeFailed;
    f.fail_holder = outcome.fault == TripFault::kHolder;
  }
  return f;
}

AfterTrip DecideAfterTrip(const TripOutcome& outcome, const TripFinish& finish,
                          uint64_t trip, const std::string& holder,
                          HolderFailurePolicy policy) {
  AfterTrip a;
  if (outcome.ok || outcome.cancelled) return a;
  if (outcome.fault == TripFault::kHost) {
    a.action = AfterTrip::Action::kPause;
    a.message = "trip " + std::to_string(trip) + " failed on the host's side (the GPU or its "
                "route; holder " + holder + " is not charged): " + finish.error;
    return a;
  }
  if (outcome.fault == TripFault::kUndetermined) {
    // The host can cause whatever leaves no evidence: skipping the holder
    // would let it choose whose data trains. An operator decides instead.
    a.action = AfterTrip::Action::kPause;
    a.message = "trip " + std::to_string(trip) + " failed, and neither holder " + holder +
                " nor the host can be shown to have caused it (holder " + holder +
                " is not charged): " + finish.error +
                ". Resume to retry it, or skip the holder (gputravel skip)";
    return a;
  }
  if (outcome.fault != TripFault::kHolder) {
    // Not the holder's doing: retrying would fail the same way.
    a.action = AfterTrip::Action::kPause;
    a.message = "trip " + std::to_string(trip) + " failed: " + finish.error;
    return a;
  }
  if (policy == HolderFailurePolicy::kPause) {
    a.action = AfterTrip::Action::kPause;
    a.message = "holder " + holder + " failed (policy: pause): " + finish.error;
    return a;
  }
  a.action = AfterTrip::Action::kSkipHolder;
  a.message = "holder " + holder + " failed and is skipped for the rest of the campaign"
              " (policy: skip): " + finish.error;
  return a;
}

Completion CompletionFor(const std::vector<HolderRow>& holders) {
  bool any_ok = false;
  for (const auto& h : holders) any_ok = any_ok || h.state == kHolderDone;
  // A campaign that went without some holders says so where operators
  // look first (its error, its final event): under the skip policy it
  // completes, but those holders' data never trained the model.
  std::string without;
  for (const auto& h : holders) {
    if (h.state != kHolderFailed && h.state != kHolderSkipped) continue;
    without += (without.empty() ? "" : "; ") + h.name + " (" + h.error + ")";
  }
  if (any_ok && without.empty()) {
    return {kCampaignCompleted, "", "every active holder did every round"};
  }
  if (any_ok) {
    const std::string msg = "completed WITHOUT holders that failed or were skipped "
                            "(their data did not train the model): " + without;
    return {kCampaignCompleted, msg, msg};
  }
  const std::string msg = "every holder failed; nothing was trained";
  return {kCampaignFailed, msg, msg};
}

}  // namespace gputravel
