#ifndef GPUTRAVEL_UTIL_IDLE_TASK_H_
#define GPUTRAVEL_UTIL_IDLE_TASK_H_

namespace gputravel {

// Lowers the calling thread to SCHED_IDLE: it runs only on a CPU that has
// nothing else to run. False if the kernel refused (the thread then keeps
// its priority; the work still gets done). TaskThread(kIdle) uses it for
// work done ahead of time.
bool LowerCurrentThreadToIdle();

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_IDLE_TASK_H_
