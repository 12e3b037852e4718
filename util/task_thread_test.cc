#include "util/task_thread.h"

#include <sched.h>

#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(TaskThreadTest, RunsTasksInOrderOnOneLongLivedThread) {
  TaskThread worker;
  std::vector<int> order;
  std::vector<std::future<std::thread::id>> ids;
  for (int i = 0; i < 20; ++i) {
    ids.push_back(worker.Run([&order, i] {
      order.push_back(i);  // only the worker touches it until the gets below
      return std::this_thread::get_id();
    }));
  }
  const std::thread::id first = ids.front().get();
  EXPECT_NE(first, std::this_thread::get_id());
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(ids[i].get(), first);
  ASSERT_EQ(order.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(worker.Run([] { return std::string("result"); }).get(), "result");
}

TEST(TaskThreadTest, IdleThreadRunsAtIdlePriorityAndTheCallerKeepsItsOwn) {
  const int before = sched_getscheduler(0);
  TaskThread idle(TaskThread::Priority::kIdle);
  EXPECT_EQ(idle.Run([] { return sched_getscheduler(0); }).get(), SCHED_IDLE);
  EXPECT_TRUE(idle.lowered());
  EXPECT_EQ(sched_getscheduler(0), before);
  TaskThread normal;
  EXPECT_EQ(normal.Run([] { return sched_getscheduler(0); }).get(), before);
  EXPECT_FALSE(normal.lowered());
}

TEST(TaskThreadTest, NotReadyIsVisibleWithoutWaiting) {
  TaskThread worker;
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  auto f = worker.Run([released] {
    released.wait();
    return 7;
  });
  EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  go.set_value();
  EXPECT_EQ(f.get(), 7);
}

TEST(TaskThreadTest, DroppedResultDoesNotWaitAndQueuedTasksRunBeforeTheEnd) {
  std::atomic<int> ran{0};
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  {
    TaskThread worker;
    worker.Run([released, &ran] {
      released.wait();
      ++ran;
    });  // result dropped: this returns at once although the task waits
    worker.Run([&ran] { ++ran; });
    EXPECT_EQ(ran.load(), 0);
    go.set_value();
  }  // the destructor runs both queued tasks, then joins
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace gputravel
