#include "util/idle_task.h"

#include <sched.h>

namespace gputravel {

bool LowerCurrentThreadToIdle() {
  sched_param param{};
  param.sched_priority = 0;
  // pid 0: the calling thread (Linux schedules threads, not processes).
  return sched_setscheduler(0, SCHED_IDLE, &param) == 0;
}

}  // namespace gputravel
