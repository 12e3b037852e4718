#ifndef GPUTRAVEL_UTIL_IDLE_TASK_H_
#define GPUTRAVEL_UTIL_IDLE_TASK_H_

#include <future>
#include <utility>

namespace gputravel {

// Lowers the calling thread to SCHED_IDLE: it runs only on a CPU that has
// nothing else to run. False if the kernel refused (the thread then keeps
// its priority; the work still gets done).
bool LowerCurrentThreadToIdle();

// Runs `fn` on a new thread at idle priority and returns its result.
//
// For work done ahead of time (a P-384 ephemeral key for the next key
// exchange): on a few shared cores it must not slow down the work on a
// trip's critical path, which is what made it worth doing ahead. Whoever
// needs the result must not wait for it at normal priority behind a busy
// machine: check it is ready (wait_for(0)) and otherwise do the work inline.
// The future's destructor waits for the thread (std::async semantics).
template <typename Fn>
auto RunWhenIdle(Fn fn) -> std::future<decltype(fn())> {
  return std::async(std::launch::async, [fn = std::move(fn)]() mutable {
    LowerCurrentThreadToIdle();
    return fn();
  });
}

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_IDLE_TASK_H_
