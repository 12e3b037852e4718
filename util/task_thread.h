#ifndef GPUTRAVEL_UTIL_TASK_THREAD_H_
#define GPUTRAVEL_UTIL_TASK_THREAD_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace gputravel {

// One long-lived thread that runs the tasks given to it, one at a time, in
// the order given. It replaces a thread started per task (std::async) on the
// trip's critical path: starting and ending a thread costs clone, a stack
// and exit on every trip, several times per trip, on a few shared cores.
//
// Run() returns a future for the task's result. Unlike std::async's, that
// future does not wait for the task when dropped: a task must not touch
// anything that can die before it runs, unless its caller waits for the
// result (get() or wait()) before that. The destructor runs every task
// already queued, then joins the thread.
class TaskThread {
 public:
  enum class Priority {
    kNormal,
    // SCHED_IDLE: runs only on a CPU with nothing else to run (work done
    // ahead, such as the next exchange's ephemeral key). A caller must not
    // wait for such a result behind a busy machine: check it is ready
    // (wait_for(0)) and otherwise do the work inline.
    kIdle,
  };

  explicit TaskThread(Priority priority = Priority::kNormal);
  ~TaskThread();
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  template <typename Fn>
  auto Run(Fn fn) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    std::future<R> result = task->get_future();
    Post([task] { (*task)(); });
    return result;
  }

  // False if the kernel refused SCHED_IDLE (kIdle only; the tasks then run
  // at normal priority and still get done).
  bool lowered() const { return lowered_.load(); }

 private:
  void Post(std::function<void()> job);
  void Loop(Priority priority);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::atomic<bool> lowered_{false};
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_TASK_THREAD_H_
