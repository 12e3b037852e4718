#include "util/task_thread.h"

#include "util/idle_task.h"

namespace gputravel {

TaskThread::TaskThread(Priority priority)
    : thread_([this, priority] { Loop(priority); }) {}

TaskThread::~TaskThread() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void TaskThread::Post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> l(mu_);
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
