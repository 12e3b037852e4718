#include "util/no_core_dumps.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

// In a child, so the test process keeps its own settings: after the call
// neither limit allows a core file, the process is not dumpable, and a
// crash leaves no core (the child aborts; WCOREDUMP must be false).
TEST(NoCoreDumpsTest, NoCoreLimitNotDumpableAndACrashLeavesNoCore) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!DisableCoreDumps().ok()) _exit(10);
    struct rlimit r;
    if (getrlimit(RLIMIT_CORE, &r) != 0 || r.rlim_cur != 0 || r.rlim_max != 0) _exit(11);
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) _exit(12);
    // Raising the hard limit back needs CAP_SYS_RESOURCE; under root it
    // could, which is why the dumpable flag is the second lock.
    abort();
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  EXPECT_FALSE(WCOREDUMP(status));
}

}  // namespace
}  // namespace gputravel
