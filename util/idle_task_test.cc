#include "util/idle_task.h"

#include <sched.h>

#include <thread>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(IdleTaskTest, LowersOnlyTheCallingThread) {
  const int before = sched_getscheduler(0);
  ASSERT_NE(before, SCHED_IDLE);
  int inside = -1;
  bool lowered = false;
  std::thread t([&] {
    lowered = LowerCurrentThreadToIdle();
    inside = sched_getscheduler(0);
  });
  t.join();
  EXPECT_TRUE(lowered);
  EXPECT_EQ(inside, SCHED_IDLE);
  EXPECT_EQ(sched_getscheduler(0), before);
}

}  // namespace
}  // namespace gputravel
