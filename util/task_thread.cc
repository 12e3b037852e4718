#include "util/task_thread.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "util/idle_task.h"

namespace gputravel {

TaskThread::TaskThread(Priority priority, Placement placement)
    : placement_(placement) {
  CPU_ZERO(&allowed_);
  // The new thread inherits its creator's affinity.
  if (sched_getaffinity(0, sizeof(allowed_), &allowed_) != 0) CPU_ZERO(&allowed_);
  thread_ = std::thread([this, priority] {
    {
      std::lock_guard<std::mutex> l(mu_);
      tid_ = static_cast<pid_t>(syscall(SYS_gettid));
    }
    cv_.notify_all();
    Loop(priority);
  });
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return tid_ != 0; });
}

TaskThread::~TaskThread() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void TaskThread::SteerAwayFromCallerLocked() {
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu == steered_from_ || CPU_COUNT(&allowed_) < 2) return;
  cpu_set_t mask = allowed_;
  // A caller on a CPU the thread may not use is elsewhere already.
  if (CPU_ISSET(cpu, &mask)) CPU_CLR(cpu, &mask);
  // Best effort: if the kernel refuses (the CPUs allowed changed meanwhile),
  // the task still runs wherever the scheduler puts it.
  if (sched_setaffinity(tid_, sizeof(mask), &mask) == 0) steered_from_ = cpu;
}

void TaskThread::Post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (placement_ == Placement::kAwayFromCaller) SteerAwayFromCallerLocked();
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void TaskThread::Loop(Priority priority) {
  if (priority == Priority::kIdle) lowered_ = LowerCurrentThreadToIdle();
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace gputravel
