#include "orchestrator/campaign_changes.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
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
  // Ended by a's event below; the timeout only bounds a failing test.
  std::thread watcher([&] { a_woke = changes.WaitForChange("a", seen_a, absl::Seconds(60)); });
  for (int i = 0; i < 30000 && changes.waiting() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(changes.waiting(), 1) << "the watcher never waited";
  // Another campaign's events and progress while the watcher of "a" waits.
  // Each commit evaluates the waiter's condition as it unlocks, and a wait
  // returns only once its condition holds: the watcher sleeps on exactly
  // while the condition of "a" is false, which is checked directly.
  for (int i = 0; i < 100; ++i) changes.EventCommitted("b", 12 + i);
  changes.ProgressMoved("b", 5);
  EXPECT_FALSE(changes.WaitForChange("a", seen_a, absl::ZeroDuration()));
  EXPECT_EQ(changes.Current("a").event_seq, seen_a.event_seq);
  EXPECT_EQ(changes.Current("a").progress, seen_a.progress);
  EXPECT_FALSE(a_woke.load());
  EXPECT_EQ(changes.waiting(), 1);
  EXPECT_EQ(changes.wakeups(), 0u);
  changes.EventCommitted("a", 200);
  watcher.join();
  EXPECT_TRUE(a_woke.load());
  EXPECT_EQ(changes.wakeups(), 1u);
  EXPECT_EQ(changes.waiting(), 0);
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
