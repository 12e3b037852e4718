#include "orchestrator/storage_backoff.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/trip_steps.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

// A clock the test moves by hand.
class FakeClock {
 public:
  absl::Time Now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }
  StorageBackoff::Clock AsClock() {
    return [this] { return now_; };
  }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1800000000);
};

const absl::Status kFull = absl::ResourceExhaustedError(
    "state database /s/orchestrator.db: running COMMIT: database or disk is full (sqlite code 13)");

// Runs every probe that is due at the current time, failing it; returns
// how many were claimed.
int FailDueProbes(StorageBackoff* b) {
  int n = 0;
  while (b->ClaimProbe()) {
    ++n;
    b->ProbeResult(kFull);
  }
  return n;
}

TEST(StorageBackoffTest, ProbesAfterADelayThatDoublesUpToTheMaximum) {
  FakeClock clock;
  StorageBackoff b(clock.AsClock());
  EXPECT_FALSE(b.failing());
  EXPECT_FALSE(b.ClaimProbe());
  b.Failed(kFull);
  ASSERT_TRUE(b.failing());
  EXPECT_EQ(b.error(), kFull);

  // Probes are due 1, 2, 4, ... 32, then every 60 s: over 10 minutes of a
  // failure, 14 probes, each one at its due time and not before.
  absl::Time start = clock.Now();
  std::vector<int64_t> due_after;
  for (int s = 0; s <= 600; ++s) {
    if (FailDueProbes(&b) > 0) {
      due_after.push_back(absl::ToInt64Seconds(clock.Now() - start));
    }
    clock.Advance(absl::Seconds(1));
  }
  const std::vector<int64_t> expected = {1,   3,   7,   15,  31,  63,  123,
                                         183, 243, 303, 363, 423, 483, 543};
  EXPECT_EQ(due_after, expected);
  EXPECT_TRUE(b.failing());
}

TEST(StorageBackoffTest, OneCallerProbesAtATime) {
  FakeClock clock;
  StorageBackoff b(clock.AsClock());
  b.Failed(kFull);
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(b.ClaimProbe());
  EXPECT_FALSE(b.ClaimProbe()) << "a second worker waits for the next due time";
  // Further failures during the failure do not move the due time.
  const absl::Time due = b.next_probe();
  b.Failed(kFull);
  EXPECT_EQ(b.next_probe(), due);
}

TEST(StorageBackoffTest, ACommittedWriteEndsTheFailure) {
  FakeClock clock;
  StorageBackoff b(clock.AsClock());
  b.Failed(kFull);
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(b.ClaimProbe());
  b.ProbeResult(absl::OkStatus());
  EXPECT_FALSE(b.failing());
  EXPECT_TRUE(b.error().ok());
  EXPECT_EQ(b.Describe(), "");

  // Any write that commits does too.
  clock.Advance(absl::Minutes(5));
  b.Failed(kFull);
  ASSERT_TRUE(b.failing());
  b.Succeeded();
  EXPECT_FALSE(b.failing());
}

TEST(StorageBackoffTest, FailingAgainSoonAfterWorkingKeepsDoubling) {
  // A nearly full disk: small commits go through, larger ones fail. Each
  // time the storage "works", a worker touches the GPU once; the delays
  // still grow, so that happens at most once per (growing) delay.
  FakeClock clock;
  StorageBackoff b(clock.AsClock());
  std::vector<int64_t> delays;
  for (int i = 0; i < 8; ++i) {
    b.Failed(kFull);
    delays.push_back(absl::ToInt64Seconds(b.next_probe() - clock.Now()));
    clock.Advance(b.next_probe() - clock.Now());
    ASSERT_TRUE(b.ClaimProbe());
    b.ProbeResult(absl::OkStatus());  // the small probe commits
  }
  const std::vector<int64_t> expected = {1, 4, 16, 60, 60, 60, 60, 60};
  EXPECT_EQ(delays, expected);

  // Working for longer than the maximum delay starts over.
  clock.Advance(absl::Seconds(61));
  b.Failed(kFull);
  EXPECT_EQ(b.next_probe() - clock.Now(), absl::Seconds(1));
}

TEST(StorageBackoffTest, ShowsARunningCampaignPausedWithTheStorageError) {
  FakeClock clock;
  StorageBackoff b(clock.AsClock());
  CampaignRow row;
  row.name = "c";
  row.state = kCampaignRunning;
  b.Show(&row);
  EXPECT_EQ(row.state, kCampaignRunning) << "nothing shown while the storage works";
  EXPECT_EQ(row.error, "");

  b.Failed(kFull);
  clock.Advance(absl::Seconds(1));
  FailDueProbes(&b);
  for (const char* state : {kCampaignRunning, kCampaignPausing}) {
    CampaignRow r = row;
    r.state = state;
    b.Show(&r);
    EXPECT_EQ(r.state, kCampaignPaused) << state;
    EXPECT_THAT(r.error, HasSubstr("the state database cannot be written: state database "
                                   "/s/orchestrator.db: running COMMIT: database or disk is "
                                   "full (sqlite code 13) (since 2027-01-15T08:00:00Z; 1 retry "
                                   "failed, the next in 2 s)"));
    EXPECT_THAT(r.error, HasSubstr("the GPU is left alone"));
    EXPECT_THAT(r.error, HasSubstr("goes on by itself"));
  }
  // A campaign the engine does not run is shown as stored.
  for (const char* state : {kCampaignPaused, kCampaignCreated, kCampaignCompleted}) {
    CampaignRow r = row;
    r.state = state;
    r.error = "as stored";
    b.Show(&r);
    EXPECT_EQ(r.state, state);
    EXPECT_EQ(r.error, "as stored");
  }
  b.Succeeded();
  CampaignRow r = row;
  b.Show(&r);
  EXPECT_EQ(r.state, kCampaignRunning);
}

TEST(StorageBackoffTest, AHeldStateIsShownUntilReleased) {
  FakeClock clock;
  StorageBackoff b(clock.AsClock());
  b.Failed(kFull);
  b.Hold({"c", kCampaignPaused, "holder h failed", "paused"});
  CampaignRow row;
  row.name = "c";
  row.state = kCampaignRunning;
  CampaignRow shown = row;
  b.Show(&shown);
  EXPECT_EQ(shown.state, kCampaignPaused);
  EXPECT_THAT(shown.error, HasSubstr("holder h failed (not recorded yet"));
  EXPECT_THAT(shown.error, HasSubstr("database or disk is full"));
  EXPECT_THAT(shown.error, ::testing::Not(HasSubstr("goes on by itself")));
  // Once the storage works it is still shown as decided, until committed.
  b.Succeeded();
  shown = row;
  b.Show(&shown);
  EXPECT_EQ(shown.state, kCampaignPaused);
  EXPECT_EQ(shown.error, "holder h failed");
  ASSERT_EQ(b.Held().size(), 1u);
  EXPECT_EQ(b.Held()[0].message, "paused");
  b.Release("c");
  EXPECT_TRUE(b.Held().empty());
  shown = row;
  b.Show(&shown);
  EXPECT_EQ(shown.state, kCampaignRunning);
}

}  // namespace
}  // namespace gputravel
