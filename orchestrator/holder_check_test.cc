#include "orchestrator/holder_check.h"

#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gputravel {
namespace {

// Preflights leave channels at the agent: a bounded number per agent per
// window, so that a running campaign's prepared channel is never pushed out.
TEST(HolderCheckLimiterTest, AnAgentIsCheckedABoundedNumberOfTimesPerWindow) {
  HolderCheckLimiter limiter;
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  for (int i = 0; i < kMaxHolderChecks; ++i) {
    EXPECT_TRUE(limiter.Take("unix:/run/a.sock", "a", t0 + absl::Seconds(i)).ok()) << i;
  }
  absl::Status refused = limiter.Take("unix:/run/a.sock", "a", t0 + absl::Seconds(60));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("holder 'a' at unix:/run/a.sock"), std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("try again in 541 s"), std::string::npos) << refused;
  // Another agent is counted apart.
  EXPECT_TRUE(limiter.Take("unix:/run/b.sock", "b", t0 + absl::Seconds(60)).ok());
  // Once the oldest check leaves the window, one more is allowed.
  EXPECT_TRUE(limiter.Take("unix:/run/a.sock", "a", t0 + kHolderCheckWindow).ok());
  EXPECT_FALSE(limiter.Take("unix:/run/a.sock", "a", t0 + kHolderCheckWindow).ok());
}

}  // namespace
}  // namespace gputravel
