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

// Pins the calling thread to `cpu` for the scope, then restores its mask.
class PinCaller {
 public:
  explicit PinCaller(int cpu) {
    sched_getaffinity(0, sizeof(before_), &before_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ok_ = sched_setaffinity(0, sizeof(one), &one) == 0 && sched_getcpu() == cpu;
  }
  ~PinCaller() { sched_setaffinity(0, sizeof(before_), &before_); }
  bool ok() const { return ok_; }

 private:
  cpu_set_t before_;
  bool ok_ = false;
};

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(TaskThreadTest, AwayFromCallerRunsOnAnotherCpuThanItsCaller) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  TaskThread beside(TaskThread::Priority::kNormal, TaskThread::Placement::kAwayFromCaller);
  TaskThread any;
  auto where = [] { return sched_getcpu(); };
  for (int round = 0; round < 3; ++round) {
    for (int cpu : {cpus[0], cpus[1]}) {
      PinCaller pin(cpu);
      ASSERT_TRUE(pin.ok());
      EXPECT_NE(beside.Run(where).get(), cpu) << "round " << round;
      // kAnyCpu leaves the placement to the scheduler (the thread keeps
      // every CPU its creator had).
      cpu_set_t mask;
      ASSERT_EQ(any.Run([&mask] { return sched_getaffinity(0, sizeof(mask), &mask); }).get(),
                0);
      EXPECT_EQ(static_cast<size_t>(CPU_COUNT(&mask)), cpus.size());
    }
  }
}

TEST(TaskThreadTest, AwayFromCallerWithOneCpuStillRunsThere) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  PinCaller pin(cpus[0]);
  ASSERT_TRUE(pin.ok());
  // Created by a thread that may use one CPU: there is no other to go to.
  TaskThread beside(TaskThread::Priority::kNormal, TaskThread::Placement::kAwayFromCaller);
  EXPECT_EQ(beside.Run([] { return sched_getcpu(); }).get(), cpus[0]);
}

}  // namespace
}  // namespace gputravel
