#include "device/truncation_guard.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

// The disposition the process had before the guard: counts and jumps out
// (a fault would otherwise run again).
sigjmp_buf g_jump;
volatile sig_atomic_t g_previous_calls = 0;
void PreviousHandler(int) {
  ++g_previous_calls;
  siglongjmp(g_jump, 1);
}

class TruncationGuardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    struct sigaction sa {};
    sa.sa_handler = &PreviousHandler;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGBUS, &sa, nullptr), 0);
    ASSERT_TRUE(TruncationGuard::Install().ok());
    ASSERT_TRUE(TruncationGuard::Install().ok()) << "installing twice is harmless";
  }
  void SetUp() override {
    char tmpl[] = "/dev/shm/gputravel-guard-XXXXXX";
    fd_ = mkstemp(tmpl);
    ASSERT_GE(fd_, 0);
    unlink(tmpl);
    ASSERT_EQ(ftruncate(fd_, kBytes), 0);
    ASSERT_EQ(pwrite(fd_, std::string(kBytes, 'x').data(), kBytes, 0), kBytes);
    base_ = static_cast<const volatile uint8_t*>(
        mmap(nullptr, kBytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd_, 0));
    ASSERT_NE(base_, MAP_FAILED);
  }
  void TearDown() override {
    munmap(const_cast<uint8_t*>(base_), kBytes);
    close(fd_);
  }
  static constexpr ssize_t kBytes = 4 * 4096;
  int fd_ = -1;
  const volatile uint8_t* base_ = nullptr;
};

// A read of a page its owner truncated away, inside a scope: zeros and the
// flag, no signal to anyone else.
TEST_F(TruncationGuardTest, FaultInsideTheScopeReadsZerosAndSetsTheFlag) {
  ASSERT_EQ(ftruncate(fd_, 4096), 0);  // pages 1..3 gone
  std::atomic<bool> faulted{false};
  const int before = g_previous_calls;
  uint8_t first = 0, second = 0;
  {
    TruncationGuard::Scope guard(const_cast<uint8_t*>(base_), kBytes, &faulted);
    first = base_[0];
    second = base_[2 * 4096 + 7];
  }
  EXPECT_EQ(first, 'x') << "the page the file still has";
  EXPECT_EQ(second, 0) << "the lost page reads as zeros";
  EXPECT_TRUE(faulted.load());
  EXPECT_EQ(g_previous_calls, before);
}

// Outside any scope, or outside the scope's range, or a SIGBUS sent rather
// than raised by a fault: the previous disposition, and no flag.
TEST_F(TruncationGuardTest, EverythingElseGoesToThePreviousDisposition) {
  ASSERT_EQ(ftruncate(fd_, 4096), 0);
  std::atomic<bool> faulted{false};
  int before = g_previous_calls;
  if (sigsetjmp(g_jump, 1) == 0) {
    (void)base_[3 * 4096];  // no scope
    ADD_FAILURE() << "the read of a lost page went unnoticed";
  }
  EXPECT_EQ(g_previous_calls, before + 1);
  before = g_previous_calls;
  {
    // (The jumps land inside the scope, so it still ends normally.)
    TruncationGuard::Scope guard(const_cast<uint8_t*>(base_), 4096, &faulted);  // page 0 only
    if (sigsetjmp(g_jump, 1) == 0) {
      (void)base_[3 * 4096];
      ADD_FAILURE() << "a read outside the scope's range was treated as guarded";
    }
  }
  EXPECT_EQ(g_previous_calls, before + 1);
  before = g_previous_calls;
  {
    TruncationGuard::Scope guard(const_cast<uint8_t*>(base_), kBytes, &faulted);
    if (sigsetjmp(g_jump, 1) == 0) {
      raise(SIGBUS);  // sent, not a fault
      ADD_FAILURE() << "a sent SIGBUS was swallowed";
    }
  }
  EXPECT_EQ(g_previous_calls, before + 1);
  EXPECT_FALSE(faulted.load());
}

}  // namespace
}  // namespace gputravel
