#include "util/exclusive_lock.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

std::string TempPath(const std::string& name) {
  return TestTmpDir() + "/" + name;
}

// A second lock on the same file is refused while the first is held, naming
// the path and the holder's pid; once the first is gone it is granted.
TEST(ExclusiveLockTest, SecondLockIsRefusedNamingPathAndPidUntilTheFirstEnds) {
  const std::string path = TempPath("state.lock");
  auto first = ExclusiveLock::Acquire(path, "orchestrator on state_dir D");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ExclusiveLock::Acquire(path, "orchestrator on state_dir D");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string m(second.status().message());
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("pid " + std::to_string(getpid())), std::string::npos) << m;
  EXPECT_NE(m.find("another orchestrator on state_dir D is running"), std::string::npos) << m;
  first->reset();
  auto third = ExclusiveLock::Acquire(path, "orchestrator on state_dir D");
  EXPECT_TRUE(third.ok()) << third.status();
}

// Another process is refused too (flock is per open file, across processes),
// and the lock dies with its holder: a crash leaves nothing to clean up.
TEST(ExclusiveLockTest, AnotherProcessIsRefusedAndAKilledHolderLeavesNoLock) {
  const std::string path = TempPath("cross.lock");
  auto mine = ExclusiveLock::Acquire(path, "MUX");
  ASSERT_TRUE(mine.ok()) << mine.status();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto other = ExclusiveLock::Acquire(path, "MUX");
    _exit(other.ok() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a second process got the lock";
  mine->reset();

  // A holder killed while holding it.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto held = ExclusiveLock::Acquire(path, "MUX");
    char c = held.ok() ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_FALSE(ExclusiveLock::Acquire(path, "MUX").ok());
  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(ExclusiveLock::Acquire(path, "MUX").ok());
  close(ready[0]);
  close(ready[1]);
}

// A lock file restored with a looser mode is made 0600 when taken.
TEST(ExclusiveLockTest, LockFileIsMadePrivate) {
  const std::string path = TempPath("loose.lock");
  ASSERT_TRUE(WriteFile(path, "", 0666).ok());
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  auto lock = ExclusiveLock::Acquire(path, "holder");
  ASSERT_TRUE(lock.ok()) << lock.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A lock path planted as a hard link to another file (in a shared directory
// such as /dev/shm) is refused before anything is written: taking it would
// truncate that file and write a pid into it.
TEST(ExclusiveLockTest, HardLinkedLockFileIsRefusedAndItsTargetKept) {
  const std::string victim = TempPath("victim.db");
  const std::string path = TempPath("planted.lock");
  ASSERT_TRUE(WriteFile(victim, "precious state", 0600).ok());
  ASSERT_EQ(::link(victim.c_str(), path.c_str()), 0);
  auto lock = ExclusiveLock::Acquire(path, "holder");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition) << lock.status();
  EXPECT_NE(lock.status().message().find("2 hard links"), std::string::npos)
      << lock.status();
  auto kept = ReadFile(victim);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "precious state");
}

}  // namespace
}  // namespace gputravel
