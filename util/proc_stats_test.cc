#include "util/proc_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(ProcStats, ResidentMemoryGrowsWithTouchedPages) {
  const int64_t before = ProcStatusKib(0, "VmRSS");
  ASSERT_GT(before, 0);
  std::vector<char> block(64u << 20, 1);  // written: resident
  const int64_t after = ProcStatusKib(::getpid(), "VmRSS");
  EXPECT_GE(after - before, (48 << 10)) << before << " -> " << after;
  EXPECT_EQ(block[12345], 1);
  EXPECT_EQ(ProcStatusKib(0, "NoSuchField"), -1);
}

TEST(ProcStats, OpenFilesCountsDescriptors) {
  const int64_t before = ProcOpenFiles(0);
  ASSERT_GT(before, 0);
  int fds[3];
  for (int& fd : fds) fd = ::open("/dev/null", O_RDONLY);
  EXPECT_EQ(ProcOpenFiles(0), before + 3);
  EXPECT_EQ(ProcOpenFiles(::getpid()), before + 3);
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(ProcOpenFiles(0), before);
}

TEST(ProcStats, CpuSecondsCountsWork) {
  const double before = ProcCpuSeconds(0);
  ASSERT_GE(before, 0);
  // Busy until the clock ticks (10 ms at 100 Hz), at most 30 s of wall time
  // on a loaded machine.
  volatile unsigned x = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ProcCpuSeconds(0) <= before && std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 100000; ++i) x = x + 1;
  }
  EXPECT_GT(ProcCpuSeconds(0), before);
}

TEST(ProcStats, AProcessThatIsNotThereReadsMinusOne) {
  // Beyond the kernel's pid_max (at most 2^22).
  const pid_t none = (1 << 22) + 1;
  EXPECT_EQ(ProcStatusKib(none, "VmRSS"), -1);
  EXPECT_EQ(ProcOpenFiles(none), -1);
  EXPECT_EQ(ProcCpuSeconds(none), -1);
}

}  // namespace
}  // namespace gputravel
