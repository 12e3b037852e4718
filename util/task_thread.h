#ifndef GPUTRAVEL_UTIL_TASK_THREAD_H_
#define GPUTRAVEL_UTIL_TASK_THREAD_H_

#include <sched.h>
#include <sys/types.h>

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

  enum class Placement {
    kAnyCpu,
    // For work meant to run beside its caller (two halves of one step on two
    // cores): each task is placed on a CPU other than the one the caller runs
    // on when it posts the task, when the thread may use another. Left to
    // itself, the scheduler wakes the thread on the caller's own CPU once the
    // other CPU has idled for a few milliseconds (measured on a 2-vCPU VM
    // like CI's, docs/performance.md: the two halves then take turns,
    // 1.44 ms instead of 0.8 for a P-384 ECDH beside an ECDSA check).
    kAwayFromCaller,
  };

  explicit TaskThread(Priority priority = Priority::kNormal,
                      Placement placement = Placement::kAnyCpu);
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
  // kAwayFromCaller: moves the thread off the calling thread's CPU (mu_ held).
  void SteerAwayFromCallerLocked();

  const Placement placement_;
  cpu_set_t allowed_;     // the CPUs the thread may use (its creator's)
  pid_t tid_ = 0;         // the thread's kernel id, for its affinity
  int steered_from_ = -1; // the CPU it was last moved off

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::atomic<bool> lowered_{false};
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_TASK_THREAD_H_
