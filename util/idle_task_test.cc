#include "util/idle_task.h"

#include <sched.h>

#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(IdleTaskTest, RunsAtIdlePriorityAndReturnsTheResult) {
  auto f = RunWhenIdle([] { return sched_getscheduler(0); });
  EXPECT_EQ(f.get(), SCHED_IDLE);
  auto g = RunWhenIdle([] { return std::string("made ahead"); });
  EXPECT_EQ(g.get(), "made ahead");
}

TEST(IdleTaskTest, CallerKeepsItsPriority) {
  const int before = sched_getscheduler(0);
  RunWhenIdle([] { return 0; }).get();
  EXPECT_EQ(sched_getscheduler(0), before);
  EXPECT_NE(before, SCHED_IDLE);
}

TEST(IdleTaskTest, NotReadyIsVisibleWithoutWaiting) {
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  auto f = RunWhenIdle([released] {
    released.wait();
    return 7;
  });
  EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  go.set_value();
  EXPECT_EQ(f.get(), 7);
}

}  // namespace
}  // namespace gputravel
