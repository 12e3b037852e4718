#include "orchestrator/campaign_changes.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(CampaignChangesTest, AnEventWakesOnlyTheWatchersOfItsCampaign) {
  CampaignChanges changes(8);
  changes.EventCommitted("a", 10);
  changes.EventCommitted("b", 11);
  const CampaignChanges::Version seen_a = changes.Current("a");
  EXPECT_EQ(seen_a.event_seq, 10);
  std::atomic<bool> a_woke{false};
  std::thread watcher([&] { a_woke = changes.WaitForChange("a", seen_a, absl::Seconds(2)); });
  // Another campaign's events and progress: the watcher of "a" sleeps on.
  for (int i = 0; i < 100; ++i) changes.EventCommitted("b", 12 + i);
  changes.ProgressMoved("b", 5);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(a_woke.load());
  EXPECT_EQ(changes.wakeups(), 0u);
  changes.EventCommitted("a", 200);
  watcher.join();
  EXPECT_TRUE(a_woke.load());
  EXPECT_EQ(changes.wakeups(), 1u);
}

TEST(CampaignChangesTest, ProgressAndStopWakeAndTimeoutSaysSo) {
  CampaignChanges changes(8);
  CampaignChanges::Version seen = changes.Current("a");
  EXPECT_FALSE(changes.WaitForChange("a", seen, absl::Milliseconds(20)));
  changes.ProgressMoved("a", 3);
  EXPECT_TRUE(changes.WaitForChange("a", seen, absl::Milliseconds(20)));
  seen = changes.Current("a");
  EXPECT_EQ(seen.progress, 3u);
  changes.Stop();
  EXPECT_TRUE(changes.WaitForChange("a", seen, absl::Seconds(5)));
}

TEST(CampaignChangesTest, WatchesAreBoundedPerCaller) {
  CampaignChanges changes(2);
  auto w1 = changes.StartWatch("operator 'ops'");
  auto w2 = changes.StartWatch("operator 'ops'");
  ASSERT_TRUE(w1.ok() && w2.ok());
  auto w3 = changes.StartWatch("operator 'ops'");
  ASSERT_FALSE(w3.ok());
  EXPECT_EQ(w3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(w3.status().message().find("operator 'ops' already has 2 campaign watches open"),
            std::string::npos)
      << w3.status();
  // Another caller has its own bound; an ended watch gives its place back.
  EXPECT_TRUE(changes.StartWatch("scheduler 'cron'").ok());
  w1->reset();
  EXPECT_TRUE(changes.StartWatch("operator 'ops'").ok());
}

}  // namespace
}  // namespace gputravel
